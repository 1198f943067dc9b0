"""Measurements against peers run in the same process: speed against transformers' `MarianMTModel` and
CTranslate2 (`benchmarks.speed`), translation quality against Marian trained with `Seq2SeqTrainer`
(`benchmarks.quality`) and our BPE tokenizer against SentencePiece (`benchmarks.tokenizer`). `benchmarks.marian`
builds the Marian peer's config from `training.presets`. Nothing here prints; `vanilla-transformer bench` does.
"""
