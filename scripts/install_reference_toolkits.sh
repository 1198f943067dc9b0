#!/usr/bin/env bash
# The toolkits the importer tests compare against (tests/importers), installed into the active environment after
# `pip install -e '.[dev]'` (README.md's command 2 and .ci/run run this). eole installs as a dev extra; these two
# cannot: their declared requirements conflict with the project's, so each goes in without them and with the
# requirements its tested modules import.
set -euo pipefail
# fairseq (tests/importers/test_fairseq.py): the fairseq-fixed fork (Python 3.11+), built against the installed torch
# (an isolated build would fetch another torch) and without its torchaudio requirement, which only its speech code
# imports (scikit-learn: its audio tasks import it when fairseq is imported). Its C++ build takes a few minutes once;
# pip caches the wheel.
python -m pip install --quiet cython setuptools wheel numpy 'omegaconf==2.3.0' 'hydra-core==1.3.2' bitarray sacrebleu \
    scikit-learn
python -m pip install --quiet --no-deps --no-build-isolation 'fairseq-fixed==0.12.3.1'
# JoeyNMT 2.3 (tests/importers/test_joeynmt_import.py), without its pins (protobuf<3.21 conflicts with onnx,
# onnxruntime and tensorboard): its model, search and tokenizer modules need only what the dev extras install
python -m pip install --quiet --no-deps joeynmt==2.3.0
