from conftest import small_run
from vanilla_transformer.training import train

def test_spread(tokenizer_dir, tmp_path):
    common = dict(tokenizer=tokenizer_dir, cache_dir=str(tmp_path / "c"), max_steps=200, eval_every=200,
                  max_lines=1200, valid_size=100, max_tokens=1024, dropout=0.0)
    for seed in (1, 2, 3):
        r = train(small_run(tmp_path / f"m{seed}", **common, seed=seed))
        print("memory", seed, r.valid_history[-1]["valid_loss"], sum(h["loss"] for h in r.history[-50:]) / 50, r.precision, flush=True)
    for seed in (1, 2):
        r = train(small_run(tmp_path / f"s{seed}", **common, seed=seed, streaming=True))
        print("streamed", seed, r.valid_history[-1]["valid_loss"], sum(h["loss"] for h in r.history[-50:]) / 50, flush=True)
