"""Helpers shared by the test folders: the stand-in Hub (`hub_server`), the fork server of the fault-tolerance
tests (`kill_server`), a short synthetic training run (`synthetic_run`), tiny tokenizers and remote-code runners
(`shared`), requests to a test server (`serving`) and the headless browser (`browser`)."""
