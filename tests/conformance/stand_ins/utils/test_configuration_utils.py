"""Our stand-in for transformers' tests/utils/test_configuration_utils.py, which transformers' source distribution
does not ship: `ConfigTester.check_config_arguments_init` builds a config from
`config_common_kwargs` and checks that each value is kept. These are generic `PretrainedConfig` arguments, each
set to a value other than its default."""

config_common_kwargs = {
    "return_dict": False,
    "output_hidden_states": True,
    "dtype": "float16",
    "chunk_size_feed_forward": 5,
    "id2label": {0: "label"},
    "label2id": {"label": "0"},
    "problem_type": "regression",
}
