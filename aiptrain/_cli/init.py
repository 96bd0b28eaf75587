"""`aiptrain init DIR`: start a project from the distributed TensorFlow trainer template."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("init")
@click.argument("directory", type=click.Path(path_type=Path))
def init(directory: Path) -> int:
    """Create DIR with a ready-to-submit trainer package (MultiWorkerMirrored and parameter server
    training from TF_CONFIG, checkpoints, evaluator, SavedModel export, hyperparameter reporting)."""
    from aiptrain._packaging.template import init_project  # shutil and the template: only for this command

    result = init_project(directory)
    click.echo(f"Created a trainer project in {result.directory}:")
    for path in result.files:
        click.echo(f"  {path}")
    click.echo("\nNext:")
    for command in result.next_steps:
        click.echo(f"  {command}")
    return 0
