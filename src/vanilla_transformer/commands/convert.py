"""Convert a transformers checkpoint folder into our format: Marian and M2M100 / NLLB-200 (encoder-decoder), GPT-2
(decoder-only) or BERT (encoder-only).

    vanilla-transformer convert --from marian SRC_DIR OUT_DIR   # MarianMTModel, e.g. an OPUS-MT checkpoint
    vanilla-transformer convert --from m2m100 SRC_DIR OUT_DIR   # M2M100 / NLLB-200 (dense)
    vanilla-transformer convert --from gpt2 SRC_DIR OUT_DIR     # GPT2LMHeadModel
    vanilla-transformer convert --from bert SRC_DIR OUT_DIR     # BertForMaskedLM / BertForSequenceClassification
    vanilla-transformer convert --from fairseq SRC OUT_DIR --trust_pickle  # checkpoint_best.pt + dict.*.txt + spm
    vanilla-transformer convert --from joeynmt --trust_pickle SRC_DIR OUT_DIR  # a JoeyNMT 2.x model folder
    vanilla-transformer convert --from eole SRC_DIR OUT_DIR     # an eole checkpoint folder (convert/eole.py)
    vanilla-transformer convert --from opennmt --trust_pickle MODEL.pt OUT_DIR  # OpenNMT-py 3.x (+ its .model spm)

For BERT the head follows the folder's config.json "architectures" (BertForMaskedLM and BertForPreTraining:
masked LM; BertForSequenceClassification: classification). OUT_DIR keeps the source's tokenizer files and loads
with the matching Auto class (`AutoModelForSeq2SeqLM`, `AutoModelForCausalLM`, `AutoModelForMaskedLM` /
`AutoModelForSequenceClassification`), with `trust_remote_code=True` where the package is not installed.

The source is loaded with its own transformers class (no code of the folder runs) from safetensors weights only;
`--trust_pickle` also reads a pickle-only checkpoint (pytorch_model.bin), which can run code: pass it only for a
checkpoint you trust. The sizes config.json claims are checked against the weights' shapes before any model is built.
"""

from __future__ import annotations

import importlib
import pickle
import sys

from vanilla_transformer.commands.arguments import command_parser, path_argument
from vanilla_transformer.export.folders import claim_output_folder

OUTPUT_KIND = "converted model"  # never written as a manifest: a conversion goes to a new or empty folder

# --from value -> (the source class named in --help, its module of vanilla_transformer.convert, its function)
SOURCES = {
    "marian": ("MarianMTModel", "marian", "convert_marian_checkpoint"),
    "m2m100": ("M2M100ForConditionalGeneration (M2M100, NLLB-200)", "m2m100", "convert_m2m100_checkpoint"),
    "gpt2": ("GPT2LMHeadModel", "gpt2", "convert_gpt2_checkpoint"),
    "bert": ("BertForMaskedLM or BertForSequenceClassification", "bert", "convert_bert_checkpoint"),
    "fairseq": ("fairseq transformer checkpoint", "fairseq", "convert_fairseq_checkpoint"),
    "joeynmt": ("a JoeyNMT 2.x Transformer model folder", "joeynmt", "convert_joeynmt_checkpoint"),
    "eole": ("an eole checkpoint folder", "eole", "convert_eole_checkpoint"),
    "opennmt": ("an OpenNMT-py 3.x checkpoint (.pt)", "opennmt", "convert_opennmt_checkpoint"),
}


def main(argv: list[str] | None = None) -> int:
    parser = command_parser("convert", __doc__)
    parser.add_argument(
        "--from", dest="source", choices=sorted(SOURCES), required=True, help="the checkpoint's model family"
    )
    parser.add_argument(
        "src_dir",
        type=path_argument("file or folder"),
        help="folder of the saved model, or the checkpoint file (fairseq, OpenNMT-py)",
    )
    parser.add_argument(
        "out_dir", type=path_argument("output folder"), help="folder to write the converted model to"
    )
    parser.add_argument(
        "--trust_pickle",
        action="store_true",
        help="also read pickled weights (pytorch_model.bin) when the folder has no safetensors: a pickle can run "
        "code, so only for a checkpoint you trust",
    )
    args = parser.parse_args(argv)
    _, module, function = SOURCES[args.source]
    convert = getattr(importlib.import_module(f"vanilla_transformer.convert.{module}"), function)
    try:
        # the converter refuses non-empty folders too
        claim_output_folder(args.out_dir, OUTPUT_KIND, [args.src_dir])
        out = convert(args.src_dir, args.out_dir, trust_pickle=args.trust_pickle)
    except (FileNotFoundError, ValueError, OSError, pickle.UnpicklingError) as error:
        print(f"error: {str(error).splitlines()[0] if str(error) else type(error).__name__}", file=sys.stderr)
        return 2
    print(f"converted {args.src_dir} -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
