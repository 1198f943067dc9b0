"""What `vanilla-transformer bench` measures on the user's own hardware, against peers run in the same process:
training and generation speed against transformers' `MarianMTModel`, CTranslate2 and ONNX Runtime
(`benchmarks.speed`), and the server with dynamic batching against one request at a time (`benchmarks.serving`).
`benchmarks.marian` builds the Marian peer's config from `training.presets`. Nothing here prints;
`vanilla-transformer bench` does. The studies behind the docs live in the checkout's `studies/`, not here.
"""
