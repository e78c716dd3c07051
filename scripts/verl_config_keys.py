"""Write the dotted key names of veRL's PPO trainer config, for the test of ``tomrl export verl``'s overrides.

    pip download verl==0.9.1 --no-deps -d /tmp/verl
    python scripts/verl_config_keys.py /tmp/verl/verl-0.9.1-py3-none-any.whl > tests/data/verl_ppo_trainer_keys.txt

veRL's ``main_ppo`` is a Hydra app over a struct config: a ``key=value`` override whose key is not in
the config stops the run before it starts. ``run_verl.sh`` is only ever run on a GPU machine, so
tests/training/test_verl_export.py checks each of its keys against this list instead; the list
holds key names only (no veRL code), taken from ``verl/trainer/config/_generated_ppo_trainer.yaml``,
the file veRL generates from ``ppo_trainer.yaml`` and the files it includes (actor, rollout, ref,
critic, reward, ...). Every node is listed, leaves and the mappings above them, since Hydra accepts
an override of either.

SOURCE is a veRL wheel (the version and the wheel's sha256 go in the header), a veRL checkout or
the YAML file itself; ``--note`` adds a line to the header (say, the git commit of a checkout).
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import zipfile
from pathlib import Path

import yaml

CONFIG_PATH = "verl/trainer/config/_generated_ppo_trainer.yaml"
VERSION_PATH = "verl/version/version"


def dotted_keys(node: object, prefix: str = "") -> list[str]:
    """Every mapping key under ``node`` as a dotted path, parents before children."""
    if not isinstance(node, dict):
        return []
    keys: list[str] = []
    for name, value in node.items():
        key = f"{prefix}{name}"
        keys.append(key)
        keys += dotted_keys(value, f"{key}.")
    return keys


def read_source(source: Path) -> tuple[str, list[str]]:
    """The config YAML's text and the header lines that say where it came from."""
    if source.suffix == ".whl":
        with zipfile.ZipFile(source) as wheel:
            text = wheel.read(CONFIG_PATH).decode()
            version = wheel.read(VERSION_PATH).decode().strip()
        digest = hashlib.sha256(source.read_bytes()).hexdigest()
        return text, [f"veRL {version}: PyPI wheel {source.name} (sha256 {digest})", f"path: {CONFIG_PATH}"]
    if source.is_dir():
        version_file = source / VERSION_PATH
        version = version_file.read_text().strip() if version_file.exists() else "unknown version"
        return (source / CONFIG_PATH).read_text(), [f"veRL {version}: checkout {source}", f"path: {CONFIG_PATH}"]
    return source.read_text(), [f"file: {source}"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path, help="a veRL wheel, a veRL checkout, or _generated_ppo_trainer.yaml")
    parser.add_argument("--note", action="append", default=[], help="another header line (e.g. the git commit)")
    args = parser.parse_args()
    text, header = read_source(args.source)
    keys = dotted_keys(yaml.safe_load(text))
    lines = [f"# {line}" for line in ["veRL PPO trainer config keys (scripts/verl_config_keys.py)", *header, *args.note]]
    sys.stdout.write("\n".join(lines + keys) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
