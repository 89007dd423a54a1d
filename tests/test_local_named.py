"""What the user's words name: the parameters and tools the embedded model's choices favour."""
from agent.models.local_named import named as read, said
from agent.parsing import action_schema

RECORD = {"type": "object", "required": ["case_number"],
          "properties": {"case_number": {"type": "string"}, "details": {"type": "boolean"},
                         "sortBy": {"type": "string"}, "to": {"type": "string"},
                         "categories": {"type": "array", "items": {"type": "string", "enum": ["vegan", "gluten-free"]}},
                         "unit": {"type": "string", "enum": ["km", "mi"]}}}


def named(*user: str, role: str = "user") -> set[str]:
    schema = action_schema({"get_record": RECORD, "other": {"type": "object", "properties": {}}}).schema
    return read(schema, [{"role": "system", "content": "details sort categories unit case number"},
                         *({"role": role, "content": text} for text in user)]).parameters.get("get_record", set())


def test_a_parameter_is_named_by_a_word_of_its_name_in_the_users_words():
    assert named("Look up the details of case CA123") == {"details"}
    assert named("Sort the records by date") == {"sortBy"}  # camelCase is split; "sort" is a word of the task
    assert named("the Details, please") == {"details"}  # case aside


def test_the_system_prompt_which_names_every_parameter_does_not_count():
    assert named("Look up case CA123") == set()


def test_a_required_parameter_and_a_word_shorter_than_three_letters_are_not_named():
    assert named("the case number, and send it to me") == set()  # "case" names a required one, "to" is too short


def test_a_plural_of_a_names_word_names_it():
    assert named("what units is it in?") == {"unit"}


def test_an_allowed_value_names_a_parameter_when_all_its_words_are_said():
    assert named("vegetarian and gluten-free foods") == {"categories"}
    assert named("gluten is bad") == set()
    assert named("ten km of road") == set()  # a value of two letters is too short to name it


def test_messages_in_parts_and_tool_results_are_read():
    assert named([{"type": "text", "text": "with details"}, {"type": "image_url"}], role="user") == {"details"}
    assert named("details: yes", role="tool") == {"details"}
    assert named("with details", role="assistant") == set()


def test_a_schema_of_no_calls_or_nested_past_recursion_names_nothing():
    assert read({"type": "object", "properties": {"details": {"type": "string"}}},
                [{"role": "user", "content": "details"}]).parameters == {}
    deep: dict = {}
    for _ in range(5000):
        deep = {"anyOf": [deep]}
    assert read(deep, [{"role": "user", "content": "details"}]).parameters == {}


def test_the_words_copied_from_are_the_users_and_the_tools_not_the_system_prompts_or_the_models():
    text = said([{"role": "system", "content": "Alpha"}, {"role": "user", "content": "Beta"},
                 {"role": "assistant", "content": "Gamma"}, {"role": "tool", "content": "Delta"},
                 {"role": "user", "content": [{"type": "text", "text": "Epsilon"}, {"type": "image_url"}]}])
    assert text == "beta\ndelta\nepsilon"


def schema(*names: str) -> dict:
    return action_schema({name: {"type": "object", "properties": {}} for name in names}).schema


def says(text: str, *names: str) -> bool:
    return read(schema(*names), [{"role": "system", "content": " ".join(names)},
                                 {"role": "user", "content": text}]).tool_named


def test_a_tool_is_named_when_its_names_words_but_the_first_are_said():
    assert says("Calculate the final speed of an object dropped from 100 m", "calculate_final_speed", "other_tool")
    assert says("What's the area of a circle with a radius of 10?", "geometry_area_circle")  # a namespace first
    assert says("What is the final price after a discount?", "calculateFinalPrice")  # camelCase
    assert says("How many words are there?", "count_words")  # a plural


def test_a_tool_is_not_named_when_a_word_of_it_is_missing_or_only_the_system_prompt_says_it():
    assert not says("Find the best character against a dragon", "game_find_best_weapon")
    assert not says("Read notes.txt", "read_file")
    assert not says("hello", "calculate_final_speed")  # the system prompt names it, the user does not


def test_a_one_word_name_is_its_word_and_short_words_do_not_name():
    assert says("Please integrate this", "integrate")
    assert not says("go to it", "go_to")  # no word of three letters or more: nothing to say


def test_after_the_models_first_reply_no_tool_is_named():
    """A result or a re-ask in the user's place names the tool called ("1. calculate_final_speed: 44.3")."""
    messages = [{"role": "user", "content": "the final speed of a ball"}, {"role": "assistant", "content": "[...]"},
                {"role": "user", "content": "1. calculate_final_speed: 44.3"}]
    assert not read(schema("calculate_final_speed"), messages).tool_named
    assert read(schema("calculate_final_speed"), messages[:1]).tool_named


def test_the_values_a_parameter_allows_are_read_by_tool_and_parameter():
    from agent.models.local_named import allowed_values

    schema = action_schema({"get_record": RECORD, "other": {"type": "object", "properties": {}}}).schema
    assert allowed_values(schema) == {"get_record": {"categories": ["vegan", "gluten-free"], "unit": ["km", "mi"]}}
    odd = {"type": "object", "properties": {"n": {"enum": [1, 2]}, "s": {"enum": "km"}, "t": "x", "u": {"items": 3}}}
    assert allowed_values({"anyOf": [{"properties": {"tool": {"const": "odd"}, "arguments": odd}}]}) == {}


def test_a_value_the_description_quotes_names_its_parameter_but_not_its_default():
    """BFCL's "Find details of patent lawsuits involving the company 'Apple Inc.' from the year 2010": case_type,
    "Type of the lawsuit, e.g., 'IPR', 'Patent', 'Commercial', etc. ... Default is 'all'"."""
    from agent.models.local_named import quoted

    lawsuits = {"type": "object", "required": ["company"],
                "properties": {"company": {"type": "string"},
                               "case_type": {"type": "string", "description": "Type of the lawsuit, e.g., 'IPR', "
                                             "'Patent', \"Commercial\", etc. Default is 'all'."}}}
    schema = action_schema({"find_lawsuits": lawsuits}).schema

    def found(text: str) -> set[str]:
        return read(schema, [{"role": "user", "content": text}]).parameters.get("find_lawsuits", set())

    assert found("Find the patent lawsuits of Apple") == {"case_type"}
    assert found("Find all the lawsuits of Apple") == set()  # the default is no value the user gives
    assert found("Find the IPR lawsuits of Apple") == {"case_type"}
    assert found("Find the lawsuits of Apple, ipr or not") == {"case_type"}  # case aside
    assert found("Find the commercially relevant lawsuits") == set()  # a whole word of the value
    assert quoted("Type, e.g., 'IPR', 'Patent', \"Commercial\". Default is 'all'. Say 'x y'.") == \
        ["IPR", "Patent", "Commercial", "x y"]
    assert quoted(None) == [] and quoted("it's the user's") == ["s the user"]  # apostrophes pair up: harmless
    assert quoted("'" + "a" * 10_000 + "'") == []  # long quotations are no values
