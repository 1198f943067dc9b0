"""Drives eole itself for tests/importers/test_eole.py, in its own process (eole configures logging and torch
globally): `python eole_driver.py FOLDER...` trains, in each FOLDER, the model its `train.yaml` describes with
eole's own trainer (a few steps: a random small model that eole saves with its own code), then decodes FOLDER's
`sources.txt` into source ids with eole's own pipeline (its transforms and vocabulary) and decodes those with
eole's translator (greedy and beam 4, no length penalty, `MAX_LENGTH` tokens; hypotheses as target ids), and computes
the logits of the padded batch in `batch.json` (source and decoder-input ids) with eole's model. Results go to
FOLDER/eole.json (source ids, hypotheses) and FOLDER/eole_logits.pt. eole may live in another environment: run this file with
that environment's python."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
import yaml

MAX_LENGTH = 12


def train(folder: Path) -> None:
    from eole.bin.run.train import train as eole_train
    from eole.config.run import TrainConfig

    config = yaml.safe_load((folder / "train.yaml").read_text())
    eole_train(TrainConfig(**config))


def decode(folder: Path) -> None:
    from eole.config.run import PredictConfig
    from eole.inference_engine import InferenceEnginePY

    model_dir = str(folder / "model")
    sources = (folder / "sources.txt").read_text(encoding="utf-8").splitlines()
    # the source ids of eole's own pipeline: the model's transforms (SentencePiece, if any), then its vocabulary
    engine = InferenceEnginePY(PredictConfig(model_path=model_dir, src="unused"))
    source_ids = []
    for line in sources:
        example = {"src": line, "tgt": None}
        for transform in engine.transforms.values():
            example = transform.apply(example, is_train=False)
        tokens = example["src"].split(" ") if isinstance(example["src"], str) else example["src"]
        source_ids.append(list(engine.vocabs["src"](tokens)))
    # decoding from those pieces, without transforms: the hypotheses come back as pieces, read back as ids
    pieces = [" ".join(engine.vocabs["src"].ids_to_tokens[i] for i in ids) for ids in source_ids]
    translations = {"source_ids": source_ids}
    for beam in (1, 4):
        config = PredictConfig(
            model_path=model_dir,
            src="unused",
            transforms=[],
            beam_size=beam,
            length_penalty="none",
            max_length=MAX_LENGTH,
            max_length_ratio=0,
            batch_size=len(sources),
            seed=1,
        )
        engine = InferenceEnginePY(config)
        _, _, predictions = engine.infer_list(pieces)
        vocab = engine.vocabs["tgt"]
        translations[str(beam)] = [
            [vocab[token] for token in hypotheses[0].split(" ") if token] for hypotheses in predictions
        ]
        model = engine.predictor.model
    (folder / "eole.json").write_text(json.dumps(translations, ensure_ascii=False), encoding="utf-8")
    batch = json.loads((folder / "batch.json").read_text())
    src, dec_in = torch.tensor(batch["src"]), torch.tensor(batch["decoder_input"])
    # training mode (dropout is 0 at inference) runs the full-sequence path with masks of the batch's length
    model.train()
    with torch.no_grad():
        # eole's forward feeds tgt[:, :-1] to the decoder
        out = model(src, torch.cat([dec_in, dec_in[:, :1]], 1), src.ne(batch["pad"]).sum(1))
        logits = model.generator(out.dec_out if hasattr(out, "dec_out") else out[0])
    torch.save(logits.float(), folder / "eole_logits.pt")


if __name__ == "__main__":
    for name in sys.argv[1:]:
        train(Path(name))
        decode(Path(name))
