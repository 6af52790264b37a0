"""`hwbridge schema DIR` publishes JSON Schemas that real instances validate against."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from hwbridge import DriverBinding, DriverMeta, DriverResponse, Tool, ToolCall, ToolParameter
from tests.core.drivers import Thermostat


@pytest.fixture(scope="module")
def schema_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("schema")
    proc = subprocess.run(
        [sys.executable, "-m", "hwbridge", "schema", str(out)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "DriverMeta.schema.json" in proc.stdout
    return out


def validator(schema_dir: Path, name: str) -> jsonschema.protocols.Validator:
    schema = json.loads((schema_dir / f"{name}.schema.json").read_text())
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def test_real_instances_validate(schema_dir: Path) -> None:
    driver = Thermostat()
    response = driver.process_llm_response(
        '{"tool": "get_temperature", "arguments": {"room": "kitchen"}}'
    )
    [call] = driver.detect_tool_call(
        '{"tool": "get_temperature", "arguments": {"room": "kitchen"}}'
    )
    instances = {
        "DriverMeta": Thermostat.meta,
        "DriverBinding": Thermostat.meta.bindings[0],
        "Tool": driver.list_tools()[1],
        "ToolParameter": driver.list_tools()[1].parameters[1],
        "ToolCall": call,
        "DriverResponse": response,
    }
    for name, instance in instances.items():
        validator(schema_dir, name).validate(instance.model_dump(mode="json"))


def test_schemas_refuse_invalid_metadata(schema_dir: Path) -> None:
    meta = Thermostat.meta.model_dump(mode="json")
    for bad in ({**meta, "version": "one"}, {**meta, "id": "not-a-uuid"}, {**meta, "surprise": 1}):
        with pytest.raises(jsonschema.ValidationError):
            validator(schema_dir, "DriverMeta").validate(bad)
    with pytest.raises(jsonschema.ValidationError):
        validator(schema_dir, "Tool").validate({"name": "has space", "title": "x"})


def test_every_published_model_has_a_file(schema_dir: Path) -> None:
    for model in (DriverMeta, DriverBinding, Tool, ToolParameter, ToolCall, DriverResponse):
        assert (schema_dir / f"{model.__name__}.schema.json").is_file()
