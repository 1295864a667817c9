"""Long-running services: `llm-server` (a local GGUF model, OpenAI-compatible), `stack up | down` (Prefect server,
pool, deployments, worker and LLM server), `ui` (Prefect server + UI in the foreground) and `serve` (the deployments
served from this process)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from flows.cli.options import add_engine_argument
from tasks.core.defaults import DEFAULT_GENERATOR


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """This module's commands, added to `stsgen`'s subcommands."""
    p = sub.add_parser("llm-server", help="serve a local GGUF model (OpenAI-compatible) until Ctrl-C")
    p.add_argument("--model", default=DEFAULT_GENERATOR)
    p.add_argument("--port", type=int, default=8765)
    p.add_argument("--host", default="127.0.0.1", help="bind address (0.0.0.0 only inside a container network)")
    p.add_argument("--parallel", type=int, default=4, help="llama-server's slots (requests decoded together)")
    add_engine_argument(p)
    p.set_defaults(func=_llm_server)
    p = sub.add_parser("stack", help="start/stop the local stack (Prefect server, pool, deployments, worker, LLM)")
    p.add_argument("action", choices=("up", "down"))
    p.add_argument("--model", default=DEFAULT_GENERATOR)
    p.add_argument("--base-url", help="use an existing LLM endpoint instead of starting one")
    p.set_defaults(func=_stack)
    p = sub.add_parser("ui", help="start the Prefect server + UI on 127.0.0.1 (foreground)")
    p.add_argument("--port", type=int, default=4200)
    p.set_defaults(func=_ui)
    p = sub.add_parser("serve", help="serve the deployments from this process (flow.serve)")
    p.set_defaults(func=_serve)


def _llm_server(args: argparse.Namespace) -> int:
    from tasks.llm.server import start_server

    server = start_server(args.model, port=args.port, host=args.host, engine=args.llm_engine,
                          parallel=args.parallel)
    print(f"Serving {server.model} with {server.engine} at {server.base_url} (sha256 {server.sha256[:12]}…); Ctrl-C stops it.",
          flush=True)
    try:
        server.process.wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


def _stack(args: argparse.Namespace) -> int:
    from flows import stack

    settings = stack.StackSettings(llm_model=args.model, llm_base_url=args.base_url)
    if args.action == "up":
        info = stack.up(settings)
        print(f"Prefect UI:  {info['ui']}\nLLM:         {info['llm_model']} at {info['llm_base_url']}\n"
              f"Logs:        {info['logs']}\n\nFrom another shell:\n  export PREFECT_API_URL={info['api_url']}\n"
              "  prefect deployment run 'generate-sts-triples/adhoc' -p settings='{\"n\": 20}' --watch\n\n"
              "Stop: ./stsgen stack down")
    else:
        print("stopped:", ", ".join(stack.down(settings)) or "nothing was running")
    return 0


def _ui(args: argparse.Namespace) -> int:
    os.execv(str(Path(sys.executable).with_name("prefect")),
             ["prefect", "server", "start", "--host", "127.0.0.1", "--port", str(args.port)])
    return 0


def _serve(args: argparse.Namespace) -> int:
    from flows.serve import serve

    serve()
    return 0

