"""The `longdoc` command: every command module's commands, registered here and nowhere else.

Each module under worker/cli/ defines its commands on its own `commands` Typer; this file adds
them in the order `longdoc --help` lists them. The CLI lives in `worker` because some commands
run the pipelines and the model's tokenizer (ingest, embed), which `app` may not import.
"""

from typing import Annotated

import typer

from worker.cli import (
    as_user,
    audit,
    collections,
    db,
    documents,
    embed,
    facts,
    health,
    ingest,
    jobs,
    model,
    serve,
    services,
    users,
)

# Locals off: a traceback of an unexpected error must not print page text held in variables.
cli = typer.Typer(
    name="longdoc",
    help="Faithful summaries and cited answers for long legal and medical PDFs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
)


@cli.callback()
def _root(
    as_name: Annotated[
        str | None,
        typer.Option(
            "--as",
            metavar="NAME",
            help="Act as this user: see what they see (default: the local admin).",
        ),
    ] = None,
) -> None:
    as_user.set_name(as_name)


for module in (
    db,
    documents,
    ingest,
    collections,
    embed,
    facts,
    health,
    jobs,
    services,
    model,
    serve,
    users,
    audit,
):
    cli.add_typer(module.commands)


def main() -> None:
    cli()
