"""The vendored upstream files hold test mixins, not tests of their own: tests/conformance runs them."""

collect_ignore_glob = ["transformers/*"]
