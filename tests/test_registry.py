import pytest

from agent.tools import Registry, Tool, ToolError, ToolResult, builtin_registry, tool


@tool
def greet(name: str, times: int = 1, loud: bool = False) -> str:
    """Greet someone by name."""
    return ("HELLO " if loud else "hello ") * times + name


def test_bare_decorator_makes_a_tool_from_the_function():
    assert isinstance(greet, Tool)
    assert greet.name == "greet"
    assert greet.description == "Greet someone by name."
    assert greet.function("Ada") == "hello Ada"


def test_schema_is_derived_from_the_signature():
    @tool
    def every_type(text: str, count: int, ratio: float, flag: bool, items: list[str], options: dict, path: str = "."):
        """All supported annotations."""

    assert every_type.parameters == {
        "type": "object",
        "properties": {
            "text": {"type": "string"},
            "count": {"type": "integer"},
            "ratio": {"type": "number"},
            "flag": {"type": "boolean"},
            "items": {"type": "array", "items": {"type": "string"}},
            "options": {"type": "object"},
            "path": {"type": "string", "default": "."},
        },
        "required": ["text", "count", "ratio", "flag", "items", "options"],
        "additionalProperties": False,
    }


def test_decorator_with_arguments_overrides_name_description_and_schema():
    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}

    @tool(name="search", description="Search the notes.", parameters=schema)
    def anything(**kwargs):
        return kwargs

    assert (anything.name, anything.description, anything.parameters) == ("search", "Search the notes.", schema)


def test_docstring_is_cleaned():
    @tool
    def documented(x: int):
        """First line.

        More detail.
        """

    assert documented.description == "First line.\n\nMore detail."


def test_a_description_is_required():
    with pytest.raises(ValueError, match="add a docstring or pass description="):

        @tool
        def undocumented(x: int):
            pass


@pytest.mark.parametrize("annotation", ["set", "int | None", "object"])
def test_unsupported_annotations_ask_for_explicit_parameters(annotation):
    namespace = {}
    exec(f"def f(x: {annotation}):\n    'Doc.'", namespace)
    with pytest.raises(TypeError, match="pass parameters="):
        tool(namespace["f"])


def test_missing_annotation_asks_for_explicit_parameters():
    with pytest.raises(TypeError, match="parameter 'x'.*pass parameters="):
        tool(lambda x: x, name="f", description="Doc.")


def test_registry_keeps_registration_order_and_lookups():
    registry = Registry([greet])

    @registry.tool
    def shout(text: str) -> str:
        """Upper-case a text."""
        return text.upper()

    @registry.tool(name="whisper")
    def lower(text: str) -> str:
        """Lower-case a text."""
        return text.lower()

    assert registry.names == ["greet", "shout", "whisper"]
    assert [t.name for t in registry] == registry.names
    assert len(registry) == 3
    assert "shout" in registry and "lower" not in registry
    assert registry.get("shout") is shout
    assert registry.get("missing") is None
    assert registry.call("whisper", {"text": "HI"}) == ToolResult(True, "hi")


def test_duplicate_names_are_refused():
    registry = Registry([greet])
    with pytest.raises(ValueError, match="already registered"):
        registry.add(greet)


def test_invalid_schemas_and_names_are_refused_when_added():
    with pytest.raises(ValueError, match="invalid parameters schema"):
        Registry([Tool("bad", "Bad.", {"type": "object", "properties": {"x": {"type": "strin"}}}, print)])
    with pytest.raises(ValueError, match="\"type\": \"object\""):
        Registry([Tool("bad", "Bad.", {"type": "string"}, print)])
    with pytest.raises(ValueError, match="invalid tool name"):
        Registry([Tool("bad name", "Bad.", {"type": "object"}, print)])


def test_check_arguments_gives_the_json_path():
    registry = Registry([greet])
    assert registry.check_arguments("greet", {"name": "Ada"}) is None
    assert registry.check_arguments("greet", {"name": 5}) == "arguments for greet: $.name: 5 is not of type 'string'"
    assert registry.check_arguments("greet", {}) == "arguments for greet: $: 'name' is a required property"
    assert "'extra' was unexpected" in registry.check_arguments("greet", {"name": "Ada", "extra": 1})
    assert registry.check_arguments("nope", {}) == "unknown tool 'nope'; available tools: greet"


def test_call_converts_return_values_to_text():
    registry = Registry()
    registry.add(tool(lambda: {"ü": [1, 2]}, name="data", description="Data.", parameters={"type": "object"}))
    registry.add(tool(lambda: 42, name="number", description="Number.", parameters={"type": "object"}))
    assert registry.call("data", {}).text == '{"ü": [1, 2]}'
    assert registry.call("number", {}).text == "42"
    registry.add(tool(lambda: None, name="nothing", description="Nothing.", parameters={"type": "object"}))
    assert registry.call("nothing", {}).text == "(no output)"


def test_invalid_arguments_become_an_error_result_with_the_expected_signature():
    result = Registry([greet]).call("greet", {"name": 5})
    assert result == ToolResult(
        False,
        "error: arguments for greet: $.name: 5 is not of type 'string' "
        "(expected: greet(name: string, times?: integer = 1, loud?: boolean = false))",
    )


def test_unknown_tool_lists_the_available_tools():
    result = Registry([greet, tool(lambda: "", name="other", description="Other.", parameters={"type": "object"})]).call(
        "x", {}
    )
    assert result == ToolResult(False, "error: unknown tool 'x'; available tools: greet, other")


def test_tool_errors_and_exceptions_become_error_results():
    registry = Registry()

    @registry.tool
    def expected(path: str):
        """Fails on purpose."""
        raise ToolError(f"file not found: {path} (use list_dir to see the files)")

    @registry.tool
    def broken(x: int):
        """Has a bug."""
        return 1 / x

    assert registry.call("expected", {"path": "a.txt"}) == ToolResult(
        False, "error: file not found: a.txt (use list_dir to see the files)"
    )
    assert registry.call("broken", {"x": 0}) == ToolResult(
        False, "error: broken failed: ZeroDivisionError: division by zero"
    )


def test_keyboard_interrupt_is_not_swallowed():
    registry = Registry()

    @registry.tool
    def interrupted():
        """Simulates Ctrl-C."""
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        registry.call("interrupted", {})


def test_describe_is_a_compact_listing():
    @tool(
        parameters={
            "type": "object",
            "properties": {"unit": {"enum": ["c", "f"]}, "days": {"type": "array", "items": {"type": "integer"}}},
            "required": ["unit"],
        }
    )
    def weather(unit, days=()):
        """Get the weather
        for the coming days."""

    assert Registry([greet, weather]).describe() == (
        "- greet(name: string, times?: integer = 1, loud?: boolean = false) — Greet someone by name.\n"
        "- weather(unit: enum, days?: integer[]) — Get the weather for the coming days.\n"
        '    unit (enum, required, one of "c" | "f")'
    )


def test_describe_keeps_all_the_documentation_native_mode_would_send():
    @tool(parameters={
        "type": "object", "required": ["amount", "stops"],
        "properties": {
            "amount": {"type": "number", "description": "in euros; 5% is written 0.05", "minimum": 0},
            "stops": {"type": "array", "description": "the route",
                      "items": {"type": "object", "properties": {"city": {"type": "string", "description": "IATA code"}}}},
            "days": {"type": "array", "items": {"enum": ["mon", "tue"]}},
            "anything": {"description": "any JSON value"},
        }})
    def plan(**kwargs):
        """Plan a trip."""

    assert Registry([plan]).describe() == (
        "- plan(amount: number, stops: object[], days?: enum[], anything?: any) — Plan a trip.\n"
        "    amount (number, required, >= 0): in euros; 5% is written 0.05\n"
        "    stops (object[], required): the route\n"
        "        city (string, optional): IATA code\n"
        '    days (enum[], optional, each one of "mon" | "tue")\n'
        "    anything (any, optional): any JSON value"
    )


def test_openai_tools_shape_and_parameters_are_copies():
    registry = Registry([greet])
    specs = registry.openai_tools()
    assert specs == [
        {"type": "function", "function": {"name": "greet", "description": greet.description, "parameters": greet.parameters}}
    ]
    specs[0]["function"]["parameters"]["properties"].clear()
    registry.parameters()["greet"]["required"].clear()
    assert registry.parameters() == {"greet": greet.parameters}
    assert greet.parameters["required"] == ["name"]


def test_builtin_registry_has_the_builtin_tools_in_order(tmp_path):
    registry = builtin_registry(tmp_path)
    assert registry.names == ["calculator", "read_file", "write_file", "list_dir", "current_time"]
    assert registry.call("calculator", {"expression": "6*7"}) == ToolResult(True, "42")
    assert registry.call("write_file", {"path": "a.txt", "content": "hi"}).ok
    assert registry.call("read_file", {"path": "a.txt"}) == ToolResult(True, "hi")


def test_run_uses_arguments_as_checked_and_call_still_checks_them():
    registry = Registry([greet])
    assert registry.run("greet", {"name": "Ada", "times": 2}) == ToolResult(True, "hello hello Ada")
    # run trusts its caller: arguments the schema refuses reach the function, whose failure becomes a result
    unchecked = registry.run("greet", {"name": 5})
    assert not unchecked.ok and unchecked.text.startswith("error: greet failed: TypeError")
    assert registry.call("greet", {"name": 5}).text.startswith("error: arguments for greet: $.name")
    assert registry.run("nope", {}) == ToolResult(False, "error: unknown tool 'nope'; available tools: greet")
