"""The subcommands of `vanilla-transformer` (see `vanilla_transformer.cli`): argument parsing, wiring and
printing over the library packages; each module's ``main(argv)`` returns the exit status."""
