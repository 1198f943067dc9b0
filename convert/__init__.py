"""Checkpoints of other toolkits -> vanilla-transformer folders with remote code (`vanilla-transformer convert`).

One module per source: `marian` (transformers' MarianMTModel), `m2m100` (M2M100ForConditionalGeneration: M2M100 and
NLLB-200), `gpt2` (GPT2LMHeadModel), `bert` (BertForMaskedLM,
BertForSequenceClassification), `fairseq`, `eole`, `opennmt` (OpenNMT-py 3.x, converted through eole's mapping),
`joeynmt`; `common` holds what they share (the loading policy, the size checks, the one folder rule) and
`vocabulary` a toolkit's SentencePiece model and vocabulary as the OPUS-MT tokenizer layout. Each exposes
`convert_<source>_checkpoint(src, out_dir, trust_pickle=False)`.

The converters live apart from `modeling/`, which travels with every saved model as remote code and so imports only
the standard library, torch and transformers; a converter also reads YAML, SentencePiece models, safetensors
headers and (only with ``trust_pickle``) pickles.
"""
