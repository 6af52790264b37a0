"""JSON Schema of the MCS models (spec section 14: machine-validatable metadata)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from hwbridge.core.models import (
    DriverBinding,
    DriverMeta,
    DriverResponse,
    Tool,
    ToolCall,
    ToolParameter,
)

__all__ = ["SCHEMA_MODELS", "model_schemas", "write_schemas"]

SCHEMA_MODELS: tuple[type[BaseModel], ...] = (
    DriverMeta,
    DriverBinding,
    Tool,
    ToolParameter,
    ToolCall,
    DriverResponse,
)
_BASE_URI = "https://hwbridge.dev/schema/mcs/"


def model_schemas() -> dict[str, dict[str, Any]]:
    """File name -> JSON Schema (draft 2020-12) for every published model."""
    out = {}
    for model in SCHEMA_MODELS:
        schema = model.model_json_schema(mode="serialization")
        name = f"{model.__name__}.schema.json"
        out[name] = {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": _BASE_URI + name,
            **schema,
        }
    return out


def write_schemas(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, schema in model_schemas().items():
        path = directory / name
        path.write_text(json.dumps(schema, indent=2, sort_keys=False) + "\n", encoding="utf-8")
        written.append(path)
    return written
