"""template.yaml as data: CloudFormation's short-form tags (!Ref, !GetAtt, !Sub, ...) kept as plain
`{tag: value}` mappings (the tests and the Lambda package benchmark read it the same way)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

TEMPLATE = Path(__file__).resolve().parents[2] / "template.yaml"


class _CfnLoader(yaml.SafeLoader):
    """YAML loader that keeps CloudFormation short-form tags as plain values."""


def _tag(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> Any:
    if isinstance(node, yaml.ScalarNode):
        return {suffix: loader.construct_scalar(node)}
    if isinstance(node, yaml.SequenceNode):
        return {suffix: loader.construct_sequence(node, deep=True)}
    return {suffix: loader.construct_mapping(node, deep=True)}  # type: ignore[arg-type]


_CfnLoader.add_multi_constructor("!", _tag)


def load_template(path: Path = TEMPLATE) -> dict[str, Any]:
    data: dict[str, Any] = yaml.load(path.read_text(), Loader=_CfnLoader)
    return data
