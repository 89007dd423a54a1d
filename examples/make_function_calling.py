"""Writes function_calling.jsonl: a function-calling suite for `agent eval`, written for this project.

    python3 examples/make_function_calling.py      # rewrites examples/function_calling.jsonl

Four categories: `single` (one tool offered, one call), `choose` (one call to the right one of several tools),
`parallel` (2-4 independent calls in one go), `none` (no offered tool fits; the right reply is an answer
without a call). Edit the tools or the items here, not the JSONL.
"""
from __future__ import annotations

import itertools
import json
from pathlib import Path

OUT = Path(__file__).with_name("function_calling.jsonl")


# --- the tools ------------------------------------------------------------------------------------

def function(name: str, description: str, required: list[str], **properties) -> dict:
    return {"type": "function", "function": {"name": name, "description": description, "parameters": {
        "type": "object", "properties": properties, "required": required, "additionalProperties": False}}}


def param(kind: str, description: str, **schema) -> dict:
    return {"type": kind, "description": description, **schema}


DATE = "A calendar date as YYYY-MM-DD, e.g. 2026-03-14."
LENGTH_UNITS = ["mm", "cm", "m", "km", "in", "ft", "yd", "mi", "nmi"]
MASS_UNITS = ["mg", "g", "kg", "t", "oz", "lb", "st"]
VOLUME_UNITS = ["ml", "l", "tsp", "tbsp", "cup", "fl_oz", "gal_us", "gal_uk"]
SCALES = ["celsius", "fahrenheit", "kelvin"]
CURRENCY = ("Three-letter ISO 4217 code of a national currency, e.g. USD, EUR, JPY; "
            "cryptocurrencies are not supported.")
RATE = "Annual interest rate as a fraction: 5% is written 0.05."
CHARACTER_SETS = ["lowercase", "uppercase", "digits", "symbols"]
POINT = {"type": "object", "description": "A point in the plane.", "required": ["x", "y"],
         "additionalProperties": False,
         "properties": {"x": param("number", "Horizontal coordinate."), "y": param("number", "Vertical coordinate.")}}

TOOLS = {tool["function"]["name"]: tool for tool in [
    function("convert_length", "Convert a length or distance from one unit to another.",
             ["value", "from_unit", "to_unit"],
             value=param("number", "The length to convert, in from_unit."),
             from_unit=param("string", "Unit of value: mm, cm, m, km, in (inch), ft (foot), yd (yard), "
                             "mi (statute mile), nmi (nautical mile).", enum=LENGTH_UNITS),
             to_unit=param("string", "Unit of the result; same codes as from_unit.", enum=LENGTH_UNITS),
             precision=param("integer", "Decimal places in the result.", minimum=0, maximum=10, default=3)),
    function("convert_temperature", "Convert a temperature between Celsius, Fahrenheit and Kelvin.",
             ["value", "from_scale", "to_scale"],
             value=param("number", "The temperature to convert, on from_scale."),
             from_scale=param("string", "Scale of value.", enum=SCALES),
             to_scale=param("string", "Scale of the result.", enum=SCALES)),
    function("convert_mass", "Convert a mass or weight from one unit to another.", ["value", "from_unit", "to_unit"],
             value=param("number", "The mass to convert, in from_unit."),
             from_unit=param("string", "Unit of value: mg, g, kg, t (metric tonne), oz (ounce), lb (pound), "
                             "st (stone, 14 lb).", enum=MASS_UNITS),
             to_unit=param("string", "Unit of the result; same codes as from_unit.", enum=MASS_UNITS)),
    function("convert_volume", "Convert a volume of liquid or dry goods (kitchen and fuel units) between units.",
             ["value", "from_unit", "to_unit"],
             value=param("number", "The volume to convert, in from_unit."),
             from_unit=param("string", "Unit of value: ml, l, tsp, tbsp, cup (US cup, 236.6 ml), fl_oz (US fluid "
                             "ounce), gal_us (US gallon), gal_uk (imperial gallon).", enum=VOLUME_UNITS),
             to_unit=param("string", "Unit of the result; same codes as from_unit.", enum=VOLUME_UNITS)),
    function("add_to_date", "Add (or, with a negative amount, subtract) a number of days, weeks, months or years "
             "to a date. Month arithmetic clamps to the month's last day.", ["date", "amount", "unit"],
             date=param("string", "The starting date. " + DATE),
             amount=param("integer", "How many units to add; negative to go back in time."),
             unit=param("string", "The unit of amount.", enum=["days", "weeks", "months", "years"])),
    function("days_between", "Count the days from one date to another (the start date counts, the end date "
             "does not).", ["start_date", "end_date"],
             start_date=param("string", "The first date. " + DATE),
             end_date=param("string", "The last date, not counted. " + DATE),
             count=param("string", "calendar_days counts every day; business_days counts Monday to Friday only "
                         "(no holidays).", enum=["calendar_days", "business_days"], default="calendar_days")),
    function("day_of_week", "The day of the week (Monday ... Sunday) of a date in the Gregorian calendar.",
             ["date"], date=param("string", DATE)),
    function("convert_time_zone", "Convert a local date and time from one time zone to another, daylight saving "
             "time included.", ["datetime", "from_zone", "to_zone"],
             datetime=param("string", "The local date and time in from_zone as YYYY-MM-DDTHH:MM, e.g. "
                            "2026-03-14T09:30 (24-hour clock)."),
             from_zone=param("string", "IANA time zone of datetime, e.g. Europe/Paris, America/New_York."),
             to_zone=param("string", "IANA time zone to convert to, e.g. Asia/Tokyo.")),
    function("convert_currency", "Convert an amount of money between currencies at the day's reference rate.",
             ["amount", "from_currency", "to_currency"],
             amount=param("number", "The amount to convert, in from_currency, e.g. 1250.50."),
             from_currency=param("string", "The currency of amount. " + CURRENCY, pattern="^[A-Z]{3}$"),
             to_currency=param("string", "The currency to convert to. " + CURRENCY, pattern="^[A-Z]{3}$"),
             date=param("string", "Use the rate of this past day instead of the latest one. " + DATE)),
    function("compound_interest", "The balance of a deposit after compound interest, with no further deposits.",
             ["principal", "annual_rate", "years"],
             principal=param("number", "The amount deposited at the start."),
             annual_rate=param("number", RATE, minimum=0, maximum=1),
             years=param("integer", "How many whole years the money stays invested.", minimum=1),
             compounds_per_year=param("integer", "How often interest is added: 1 yearly, 4 quarterly, 12 monthly, "
                                      "365 daily.", enum=[1, 2, 4, 12, 365], default=12)),
    function("loan_payment", "The fixed monthly payment that repays a loan (an annuity), interest included.",
             ["principal", "annual_rate", "term_months"],
             principal=param("number", "The amount borrowed."),
             annual_rate=param("number", RATE + " An APR of 6.9% is 0.069.", minimum=0, maximum=1),
             term_months=param("integer", "Length of the loan in months: 5 years is 60.", minimum=1)),
    function("split_bill", "Each person's share of a bill, tip included, shared equally.", ["total", "people"],
             total=param("number", "The bill before tip."),
             people=param("integer", "How many people share it.", minimum=1),
             tip_rate=param("number", "Tip as a fraction of the total: 15% is 0.15.", minimum=0, default=0)),
    function("sales_tax", "Sales tax or VAT on a price: the tax, the net and the gross amount.", ["amount", "rate"],
             amount=param("number", "The price."),
             rate=param("number", "Tax rate as a fraction: 8.25% is 0.0825, 19% VAT is 0.19.", minimum=0, maximum=1),
             prices_include_tax=param("boolean", "true when amount already includes the tax (a gross price); "
                                      "false when the tax is to be added.", default=False)),
    function("percent_change", "The percentage change from an old value to a new one (negative for a decrease).",
             ["old_value", "new_value"],
             old_value=param("number", "The value before; not zero."), new_value=param("number", "The value after.")),
    function("circle_area", "The area of a circle, in the square of the radius's unit.", ["radius"],
             radius=param("number", "The radius (half the diameter).", exclusiveMinimum=0)),
    function("rectangle_area", "The area of a rectangle, in the square of the sides' unit.", ["width", "height"],
             width=param("number", "One side.", exclusiveMinimum=0),
             height=param("number", "The other side, in the same unit.", exclusiveMinimum=0)),
    function("triangle_area", "The area of a triangle from the lengths of its three sides (Heron's formula).",
             ["sides"], sides=param("array", "The three side lengths, in one unit.", items={"type": "number"},
                                    minItems=3, maxItems=3)),
    function("cylinder_volume", "The volume of a cylinder, in the cube of the unit of its dimensions.",
             ["radius", "height"],
             radius=param("number", "Radius of the base.", exclusiveMinimum=0),
             height=param("number", "Height, in the same unit as radius.", exclusiveMinimum=0)),
    function("distance_between_points", "The straight-line (Euclidean) distance between two points of the plane.",
             ["a", "b"], a={**POINT, "description": "The first point, {\"x\": ..., \"y\": ...}."},
             b={**POINT, "description": "The second point, {\"x\": ..., \"y\": ...}."}),
    function("count_words", "Count the words of a text (runs of letters, digits and apostrophes).", ["text"],
             text=param("string", "The text to count."),
             unique=param("boolean", "true counts distinct words only, ignoring case.", default=False)),
    function("change_case", "Rewrite a text in another letter case or identifier style.", ["text", "style"],
             text=param("string", "The text to rewrite."),
             style=param("string", "upper: ALL CAPS; lower; title: Each Word Capitalised; sentence: First word only; "
                         "snake: snake_case; camel: camelCase; kebab: kebab-case.",
                         enum=["upper", "lower", "title", "sentence", "snake", "camel", "kebab"])),
    function("find_and_replace", "Replace occurrences of a phrase in a text.", ["text", "find", "replace"],
             text=param("string", "The text to edit."), find=param("string", "The phrase to look for."),
             replace=param("string", "What to put instead; may be empty."),
             options=param("object", "How to match; every key may be left out.", additionalProperties=False,
                           properties={
                               "case_sensitive": param("boolean", "Match letter case exactly.", default=True),
                               "whole_words": param("boolean", "Only match whole words.", default=False),
                               "max_replacements": param("integer", "Stop after this many; 0 replaces all.",
                                                         minimum=0, default=0)})),
    function("truncate_text", "Shorten a text to a maximum number of characters.", ["text", "max_length"],
             text=param("string", "The text to shorten."),
             max_length=param("integer", "The most characters to keep, the ellipsis included.", minimum=1),
             ellipsis=param("boolean", "End a shortened text with '…'.", default=True)),
    function("is_palindrome", "Whether a text reads the same backwards.", ["text"],
             text=param("string", "The text to test."),
             ignore_case=param("boolean", "Treat upper and lower case as the same.", default=True),
             ignore_punctuation=param("boolean", "Skip spaces and punctuation.", default=True)),
    function("slugify", "Turn a title into a URL slug: lower case ASCII words joined by a separator.", ["text"],
             text=param("string", "The title."),
             separator=param("string", "The character between words.", enum=["-", "_"], default="-")),
    function("sort_numbers", "Sort a list of numbers.", ["numbers"],
             numbers=param("array", "The numbers to sort.", items={"type": "number"}, minItems=1),
             order=param("string", "Sort order.", enum=["ascending", "descending"], default="ascending")),
    function("list_statistics", "Summary statistics of a list of numbers.", ["numbers", "measures"],
             numbers=param("array", "The data.", items={"type": "number"}, minItems=1),
             measures=param("array", "Which statistics to compute; stdev is the sample standard deviation.",
                            items={"type": "string", "enum": ["count", "sum", "mean", "median", "min", "max",
                                                              "stdev"]}, minItems=1, uniqueItems=True)),
    function("remove_duplicates", "Remove repeated items from a list, keeping the first of each.", ["items"],
             items=param("array", "The list.", items={"type": "string"}),
             case_sensitive=param("boolean", "false treats 'Apple' and 'apple' as the same item.", default=True)),
    function("chunk_list", "Split a list into consecutive groups of a given size (the last may be shorter).",
             ["items", "size"], items=param("array", "The list.", items={"type": "string"}),
             size=param("integer", "Items per group.", minimum=1)),
    function("round_number", "Round a number to a number of decimal places with a chosen rule.",
             ["value", "decimals"],
             value=param("number", "The number to round."),
             decimals=param("integer", "Decimal places to keep; 0 for a whole number.", minimum=0, maximum=15),
             mode=param("string", "half_up: 2.5 → 3; half_even (banker's rounding): 2.5 → 2; floor: always down; "
                        "ceiling: always up.", enum=["half_up", "half_even", "floor", "ceiling"],
                        default="half_up")),
    function("format_number", "Format a number for display in a locale, as a decimal, a percentage or money.",
             ["value", "style"],
             value=param("number", "The number; for percent, a fraction (0.25 shows as 25%)."),
             style=param("string", "How to show it.", enum=["decimal", "percent", "currency"]),
             decimals=param("integer", "Digits after the decimal point.", minimum=0, maximum=10, default=2),
             currency=param("string", "ISO 4217 code; required when style is currency.", pattern="^[A-Z]{3}$"),
             locale=param("string", "BCP 47 locale for separators and symbols, e.g. en-US, de-DE, fr-FR.",
                          default="en-US")),
    function("to_roman", "Write a whole number in Roman numerals.", ["number"],
             number=param("integer", "The number, from 1 to 3999.", minimum=1, maximum=3999)),
    function("generate_password", "Generate a random password.", ["length"],
             length=param("integer", "Number of characters.", minimum=8, maximum=128),
             character_sets=param("array", "Kinds of characters to draw from; default all four.",
                                  items={"type": "string", "enum": CHARACTER_SETS}, minItems=1, uniqueItems=True),
             exclude_ambiguous=param("boolean", "Leave out look-alike characters such as 0/O and 1/l/I.",
                                     default=False)),
    function("search_flights", "Search scheduled flights for one direction on one day.",
             ["origin", "destination", "depart_date"],
             origin=param("string", "IATA code of the departure airport, e.g. LIS.", pattern="^[A-Z]{3}$"),
             destination=param("string", "IATA code of the arrival airport, e.g. BER.", pattern="^[A-Z]{3}$"),
             depart_date=param("string", "Day of departure. " + DATE),
             passengers=param("object", "Who travels; default one adult.", additionalProperties=False,
                              properties={"adults": param("integer", "Travellers aged 12 or more.", minimum=1,
                                                          default=1),
                                          "children": param("integer", "Travellers aged 2 to 11.", minimum=0,
                                                            default=0)}),
             cabin=param("string", "Cabin class.", enum=["economy", "premium_economy", "business", "first"],
                         default="economy"),
             filters=param("object", "Optional restrictions.", additionalProperties=False, properties={
                 "max_stops": param("integer", "0 for nonstop flights only.", minimum=0, maximum=2),
                 "airlines": param("array", "Only these airlines, as two-letter IATA codes, e.g. [\"TP\", \"LH\"].",
                                   items={"type": "string", "pattern": "^[A-Z0-9]{2}$"})})),
    function("create_event", "Add an event to the user's calendar.", ["title", "start", "duration_minutes"],
             title=param("string", "The event's title."),
             start=param("string", "Local start as YYYY-MM-DDTHH:MM (24-hour clock)."),
             duration_minutes=param("integer", "Length in minutes.", minimum=1),
             attendees=param("array", "Email addresses of people to invite.", items={"type": "string"}),
             reminder=param("object", "A reminder before the start.", required=["minutes_before"],
                            additionalProperties=False, properties={
                                "minutes_before": param("integer", "How long before the start; a day is 1440.",
                                                        minimum=0),
                                "method": param("string", "How to remind.", enum=["popup", "email"],
                                                default="popup")})),
    function("shipping_quote", "Price and delivery time to ship one parcel from our warehouse.",
             ["weight_kg", "package", "destination_country"],
             weight_kg=param("number", "Weight in kilograms.", exclusiveMinimum=0),
             package=param("object", "Outer dimensions in centimetres.", required=["length_cm", "width_cm",
                                                                                  "height_cm"],
                           additionalProperties=False, properties={
                               "length_cm": param("number", "Longest side."), "width_cm": param("number", "Width."),
                               "height_cm": param("number", "Height.")}),
             destination_country=param("string", "ISO 3166-1 alpha-2 code, e.g. DE for Germany.",
                                       pattern="^[A-Z]{2}$"),
             service=param("string", "Speed of delivery.", enum=["standard", "express", "overnight"],
                           default="standard")),
]}


# --- items --------------------------------------------------------------------------------------------

ITEMS: list[dict] = []


def call(tool: str, result, optional: dict | None = None, **arguments) -> dict:
    """An expected call: an argument is one value, or alternatives(...) for several acceptable ones.
    ``optional`` maps the arguments that may be left out to their acceptable values (None: any value)."""
    pattern = {name: value.values if isinstance(value, alternatives) else [value] for name, value in
               arguments.items()}
    for name, value in (optional or {}).items():
        if value is not None:
            pattern[name] = value.values if isinstance(value, alternatives) else [value]
    return {"tool": tool, "arguments": pattern, **({"optional": list(optional)} if optional else {}),
            "result": result}


class alternatives:
    def __init__(self, *values):
        self.values = list(values)


def any_order(items: list) -> alternatives:
    return alternatives(*(list(p) for p in itertools.permutations(items)))


def with_defaults(base: dict, **defaults) -> alternatives:
    """The object as given, or with any of these default-valued keys spelled out."""
    keys = list(defaults)
    subsets = itertools.chain.from_iterable(itertools.combinations(keys, n) for n in range(len(keys) + 1))
    return alternatives(*({**base, **{k: defaults[k] for k in subset}} for subset in subsets))


def item(category: str, id: str, task: str, tools: list[str], *calls: dict) -> None:
    results: dict[str, list] = {}
    for expected in calls:
        required = {k: v for k, v in expected["arguments"].items() if k not in expected.get("optional", [])}
        results.setdefault(expected["tool"], []).append({"when": required, "result": expected["result"]})
    checks = {"calls_match": [{k: v for k, v in c.items() if k != "result"} for c in calls]} if calls else {
        "no_call": True}
    line = {"id": id, "category": category, "task": task, "tools": [TOOLS[name] for name in tools]}
    ITEMS.append({**line, **({"results": results} if results else {}), "checks": checks})


def single(id: str, task: str, expected: dict) -> None:
    item("single", id, task, [expected["tool"]], expected)


def choose(id: str, task: str, tools: list[str], expected: dict) -> None:
    item("choose", id, task, tools, expected)


def parallel(id: str, task: str, tools: list[str], *calls: dict) -> None:
    item("parallel", id, task, tools, *calls)


def none(id: str, task: str, tools: list[str]) -> None:
    item("none", id, task, tools)


PRECISION = {"precision": 3}
CALENDAR = {"count": "calendar_days"}
EN_US = {"locale": "en-US"}


# a single call: one tool offered, one call to make
single("s-len-marathon", "How many miles is a marathon of 42.195 km?",
       call("convert_length", "26.219 mi", PRECISION, value=42.195, from_unit="km", to_unit="mi"))
single("s-len-height", "My brother is 6 feet tall. How much is that in centimeters?",
       call("convert_length", "182.880 cm", PRECISION, value=6, from_unit="ft", to_unit="cm"))
single("s-temp-oven", "The recipe says to bake at 180 °C. What is that in Fahrenheit?",
       call("convert_temperature", "356 °F", value=180, from_scale="celsius", to_scale="fahrenheit"))
single("s-temp-kelvin", "Express -40 degrees Fahrenheit in kelvin.",
       call("convert_temperature", "233.15 K", value=-40, from_scale="fahrenheit", to_scale="kelvin"))
single("s-mass-stone", "I weigh 11 stone. How many kilograms is that?",
       call("convert_mass", "69.853 kg", value=11, from_unit="st", to_unit="kg"))
single("s-vol-cups", "How many milliliters are in 3 US cups of milk?",
       call("convert_volume", "709.76 ml", value=3, from_unit="cup", to_unit="ml"))
single("s-date-add", "What date is 90 days after 2025-11-03?",
       call("add_to_date", "2026-02-01", date="2025-11-03", amount=90, unit="days"))
single("s-date-back", "What was the date six weeks before 2026-01-15?",
       call("add_to_date", "2025-12-04", date="2026-01-15", amount=-6, unit="weeks"))
single("s-days-span", "How many calendar days are there from 2025-03-01 to 2025-12-25?",
       call("days_between", "299 days", CALENDAR, start_date="2025-03-01", end_date="2025-12-25"))
single("s-days-business", "How many business days are there from 2025-06-02 to 2025-06-30?",
       call("days_between", "20 business days", start_date="2025-06-02", end_date="2025-06-30",
            count="business_days"))
single("s-weekday-moon", "On which day of the week was 1969-07-20, the day of the first Moon landing?",
       call("day_of_week", "Sunday", date="1969-07-20"))
single("s-tz-tokyo", "A meeting is at 09:30 on 2025-10-14 in New York (America/New_York). What time is that in "
       "Tokyo (Asia/Tokyo)?",
       call("convert_time_zone", "2025-10-14T22:30", datetime=alternatives("2025-10-14T09:30", "2025-10-14T09:30:00"),
            from_zone="America/New_York", to_zone="Asia/Tokyo"))
single("s-fx-usd-eur", "How much is 250 US dollars in euros?",
       call("convert_currency", "231.25 EUR", amount=250, from_currency="USD", to_currency="EUR"))
single("s-fx-dated", "What were 1,000 Japanese yen worth in British pounds on 2024-12-31?",
       call("convert_currency", "5.08 GBP", amount=1000, from_currency="JPY", to_currency="GBP", date="2024-12-31"))
single("s-interest-monthly", "I put 10,000 into a savings account paying 4.5% a year, compounded monthly. How much "
       "will I have after 5 years?",
       call("compound_interest", "12517.96", {"compounds_per_year": 12}, principal=10000, annual_rate=0.045, years=5))
single("s-loan-car", "What is the monthly payment on a 25,000 car loan at 6.9% APR over 60 months?",
       call("loan_payment", "493.85 per month", principal=25000, annual_rate=0.069, term_months=60))
single("s-split-tip", "Split a restaurant bill of 184.60 among 4 people, with a 15% tip.",
       call("split_bill", "53.07 each", total=184.6, people=4, tip_rate=0.15))
single("s-tax-add", "Add 8.25% sales tax to a price of 79.99.",
       call("sales_tax", '{"net": 79.99, "tax": 6.60, "gross": 86.59}', {"prices_include_tax": False},
            amount=79.99, rate=0.0825))
single("s-circle", "What is the area of a circle with a radius of 7.5 cm?",
       call("circle_area", "176.715", radius=7.5))
single("s-distance", "How far is it from the point (1, 2) to the point (7, 10)?",
       call("distance_between_points", "10.0", a={"x": 1, "y": 2}, b={"x": 7, "y": 10}))
single("s-triangle", "A triangular garden has sides of 3 m, 4 m and 5 m. What is its area?",
       call("triangle_area", "6.0", sides=any_order([3, 4, 5])))
single("s-words", "How many words are in this sentence: 'The quick brown fox jumps over the lazy dog'?",
       call("count_words", "9", {"unique": False}, text=alternatives(
           "The quick brown fox jumps over the lazy dog", "The quick brown fox jumps over the lazy dog.")))
single("s-case-snake", "Convert 'Monthly Revenue Report' to snake_case.",
       call("change_case", "monthly_revenue_report", text="Monthly Revenue Report", style="snake"))
single("s-replace-options", "In the text 'Color me colorful, color me bold', replace the whole word 'color' with "
       "'hue', ignoring case.",
       call("find_and_replace", "hue me colorful, hue me bold", text="Color me colorful, color me bold",
            find="color", replace="hue",
            options=with_defaults({"case_sensitive": False, "whole_words": True}, max_replacements=0)))
single("s-truncate", "Shorten 'Quarterly results exceeded expectations across all regions' to at most 30 "
       "characters, without an ellipsis.",
       call("truncate_text", "Quarterly results exceeded ex", text="Quarterly results exceeded expectations across "
            "all regions", max_length=30, ellipsis=False))
single("s-sort-desc", "Sort these numbers from largest to smallest: 42, 7, 19, 88, 3.",
       call("sort_numbers", "[88, 42, 19, 7, 3]", numbers=[42, 7, 19, 88, 3], order="descending"))
single("s-stats", "Give me the mean and the median of 12, 15, 11, 19, 23, 15.",
       call("list_statistics", '{"mean": 15.833, "median": 15}', numbers=[12, 15, 11, 19, 23, 15],
            measures=any_order(["mean", "median"])))
single("s-dedupe", "Remove the duplicates from this list, treating 'Banana' and 'banana' as the same: apple, "
       "Banana, apple, cherry, banana.",
       call("remove_duplicates", '["apple", "Banana", "cherry"]',
            items=["apple", "Banana", "apple", "cherry", "banana"], case_sensitive=False))
single("s-flights", "Find nonstop flights from Lisbon (LIS) to Berlin (BER) on 2026-03-12 for 2 adults and 1 child.",
       call("search_flights", "TP 540 07:05-11:15, 212 EUR per adult", {"cabin": "economy"}, origin="LIS",
            destination="BER", depart_date="2026-03-12", passengers={"adults": 2, "children": 1},
            filters={"max_stops": 0}))
single("s-event", "Schedule 'Design review' on 2026-02-10 at 14:00 for 45 minutes with ana@example.com and "
       "li@example.com, with a popup reminder 10 minutes before.",
       call("create_event", "created event evt_4471", title="Design review", start="2026-02-10T14:00",
            duration_minutes=45, attendees=any_order(["ana@example.com", "li@example.com"]),
            reminder=alternatives({"minutes_before": 10, "method": "popup"}, {"minutes_before": 10})))
single("s-password", "Generate a 20-character password using only lowercase letters and digits.",
       call("generate_password", "k3v9q0x7m2w8c5z1r4t6", {"exclude_ambiguous": False}, length=20,
            character_sets=any_order(["lowercase", "digits"])))
single("s-shipping", "What does it cost to ship a 2.5 kg parcel measuring 40 × 30 × 15 cm to Germany by express?",
       call("shipping_quote", "31.90 EUR, 2 days", weight_kg=2.5,
            package={"length_cm": 40, "width_cm": 30, "height_cm": 15}, destination_country="DE", service="express"))
single("s-roman", "Write 1994 in Roman numerals.", call("to_roman", "MCMXCIV", number=1994))
single("s-round-even", "Round 2.675 to 2 decimal places using banker's rounding.",
       call("round_number", "2.68", value=2.675, decimals=2, mode="half_even"))
single("s-format-percent", "Format 0.4567 as a percentage with one decimal place.",
       call("format_number", "45.7%", EN_US, value=0.4567, style="percent", decimals=1))

# one of several functions: only one of the offered tools fits
UNITS = ["convert_length", "convert_mass", "convert_volume", "convert_temperature"]
DATES = ["add_to_date", "days_between", "day_of_week", "convert_time_zone"]
MONEY = ["convert_currency", "compound_interest", "loan_payment", "split_bill", "sales_tax", "percent_change"]
SHAPES = ["circle_area", "rectangle_area", "triangle_area", "cylinder_volume", "distance_between_points"]
TEXT = ["count_words", "change_case", "find_and_replace", "truncate_text", "is_palindrome", "slugify"]
LISTS = ["sort_numbers", "list_statistics", "remove_duplicates", "chunk_list"]

choose("c-mass-flour", "How many ounces is 500 g of flour?", UNITS[:3],
       call("convert_mass", "17.637 oz", value=500, from_unit="g", to_unit="oz"))
choose("c-vol-fuel", "I filled up 15 US gallons of fuel. How many liters is that?", UNITS[:3],
       call("convert_volume", "56.781 l", value=15, from_unit="gal_us", to_unit="l"))
choose("c-len-nautical", "A ship sailed 120 nautical miles. How many kilometers is that?", UNITS,
       call("convert_length", "222.240 km", PRECISION, value=120, from_unit="nmi", to_unit="km"))
choose("c-temp-fever", "My thermometer shows 38.5 °C. What is that in Fahrenheit?", UNITS[1:],
       call("convert_temperature", "101.3 °F", value=38.5, from_scale="celsius", to_scale="fahrenheit"))
choose("c-weekday", "What day of the week is 2026-07-04?", DATES[:3],
       call("day_of_week", "Saturday", date="2026-07-04"))
choose("c-add-months", "My subscription started on 2025-08-31 and runs for 6 months. On what date does it end?",
       DATES[:3], call("add_to_date", "2026-02-28", date="2025-08-31", amount=6, unit="months"))
choose("c-days-until", "How many days are there from 2025-12-01 until 2026-04-15?", DATES,
       call("days_between", "135 days", CALENDAR, start_date="2025-12-01", end_date="2026-04-15"))
choose("c-tz-call", "A call is set for 16:00 on 2026-01-20, London time (Europe/London). What time is that in Los "
       "Angeles (America/Los_Angeles)?", DATES,
       call("convert_time_zone", "2026-01-20T08:00", datetime=alternatives("2026-01-20T16:00", "2026-01-20T16:00:00"),
            from_zone="Europe/London", to_zone="America/Los_Angeles"))
choose("c-fx-chf", "Convert 1,200 Swiss francs to US dollars.", ["sales_tax", "convert_currency", "format_number"],
       call("convert_currency", "1358.40 USD", amount=1200, from_currency="CHF", to_currency="USD"))
choose("c-interest-quarterly", "What will 5,000 grow to in 10 years at 3.2% interest compounded quarterly?",
       MONEY[1:4], call("compound_interest", "6876.88", principal=5000, annual_rate=0.032, years=10,
                        compounds_per_year=4))
choose("c-mortgage", "What is the monthly payment for a 320,000 mortgage at 5.25% over 30 years?", MONEY[1:3],
       call("loan_payment", "1767.05 per month", principal=320000, annual_rate=0.0525, term_months=360))
choose("c-percent-change", "The price went from 48 to 60. What is the percentage change?", MONEY[3:],
       call("percent_change", "25.0%", old_value=48, new_value=60))
choose("c-vat-included", "A receipt shows 119.00 including 19% VAT. How much of that is tax?",
       ["percent_change", "sales_tax", "split_bill"],
       call("sales_tax", '{"net": 100.00, "tax": 19.00, "gross": 119.00}', amount=119, rate=0.19,
            prices_include_tax=True))
choose("c-split-taxi", "Five friends share a 212.50 taxi fare equally. How much does each pay?",
       ["convert_currency", "split_bill", "percent_change"],
       call("split_bill", "42.50 each", {"tip_rate": 0}, total=212.5, people=5))
choose("c-room-area", "What is the floor area of a room 4.2 m by 3.6 m?", SHAPES[:4],
       call("rectangle_area", "15.12", width=alternatives(4.2, 3.6), height=alternatives(3.6, 4.2)))
choose("c-tank", "How much water fits in a cylindrical tank with a radius of 0.5 m and a height of 2 m, in cubic "
       "meters?", SHAPES[:4], call("cylinder_volume", "1.571", radius=0.5, height=2))
choose("c-pizza", "A pizza has a diameter of 30 cm. What is its area?", SHAPES[:2],
       call("circle_area", "706.858", radius=15))
choose("c-origin", "How far is the point (-3, 4) from the origin?", SHAPES[2:],
       call("distance_between_points", "5.0", a=alternatives({"x": -3, "y": 4}, {"x": 0, "y": 0}),
            b=alternatives({"x": 0, "y": 0}, {"x": -3, "y": 4})))
choose("c-palindrome", "Ignoring case and punctuation, is 'A man, a plan, a canal: Panama' a palindrome?", TEXT[:5],
       call("is_palindrome", "true", {"ignore_case": True, "ignore_punctuation": True},
            text=alternatives("A man, a plan, a canal: Panama", "A man, a plan, a canal: Panama.")))
choose("c-slug", "Make a URL slug from the title 'Hello World: 10 Tips for Python!'", TEXT[1:],
       call("slugify", "hello-world-10-tips-for-python", {"separator": "-"}, text="Hello World: 10 Tips for Python!"))
choose("c-title-case", "Put 'the lord of the rings' in title case.", ["slugify", "change_case", "truncate_text"],
       call("change_case", "The Lord Of The Rings", text="the lord of the rings", style="title"))
choose("c-unique-words", "How many distinct words are there in 'to be or not to be'?",
       ["count_words", "remove_duplicates", "list_statistics"],
       call("count_words", "4", text="to be or not to be", unique=True))
choose("c-stdev", "What is the standard deviation of 2, 4, 4, 4, 5, 5, 7, 9?", LISTS[:2] + ["round_number"],
       call("list_statistics", '{"stdev": 2.138}', numbers=[2, 4, 4, 4, 5, 5, 7, 9], measures=["stdev"]))
choose("c-sort-asc", "Put 3.5, -1, 2.25 and 0 in ascending order.", LISTS[:3],
       call("sort_numbers", "[-1, 0, 2.25, 3.5]", {"order": "ascending"}, numbers=[3.5, -1, 2.25, 0]))
choose("c-chunk", "Split the list a, b, c, d, e, f, g into groups of 3.", LISTS,
       call("chunk_list", '[["a", "b", "c"], ["d", "e", "f"], ["g"]]', items=list("abcdefg"), size=3))
choose("c-round-down", "Round 7.89 down to a whole number.", ["format_number", "round_number", "percent_change"],
       call("round_number", "7", value=7.89, decimals=0, mode="floor"))
choose("c-format-euro", "Show 1234567.891 as an amount in euros, German style (de-DE), with 2 decimals.",
       ["round_number", "convert_currency", "format_number"],
       call("format_number", "1.234.567,89 €", {"decimals": 2}, value=1234567.891, style="currency", currency="EUR",
            locale="de-DE"))
choose("c-flight-business", "Search business-class flights from JFK to LHR on 2026-05-02 for one adult.",
       ["convert_time_zone", "search_flights", "create_event"],
       call("search_flights", "BA 112 18:30-06:45+1, 3410 USD", {"passengers": with_defaults({"adults": 1},
                                                                                          children=0)},
            origin="JFK", destination="LHR", depart_date="2026-05-02", cabin="business"))
choose("c-dentist", "Put 'Dentist' in my calendar on 2026-03-03 at 08:15 for 30 minutes, with an email reminder one "
       "day before.", ["create_event", "add_to_date", "convert_time_zone"],
       call("create_event", "created event evt_5120", {"attendees": alternatives([])}, title="Dentist",
            start="2026-03-03T08:15", duration_minutes=30, reminder={"minutes_before": 1440, "method": "email"}))
choose("c-ship-canada", "Quote standard shipping for a 0.8 kg box of 20 × 15 × 10 cm to Canada.",
       ["convert_mass", "shipping_quote", "convert_currency"],
       call("shipping_quote", "18.40 EUR, 6-9 days", {"service": "standard"}, weight_kg=0.8,
            package={"length_cm": 20, "width_cm": 15, "height_cm": 10}, destination_country="CA"))
choose("c-roman-year", "What is 2026 in Roman numerals?", ["format_number", "round_number", "to_roman"],
       call("to_roman", "MMXXVI", number=2026))
choose("c-password-strong", "I need a 16-character password with upper and lower case letters, digits and symbols, "
       "leaving out look-alike characters such as 0 and O.", ["slugify", "generate_password"],
       call("generate_password", "Tq7#mVx4&Kp9!Rz2", {"character_sets": any_order(CHARACTER_SETS)}, length=16,
            exclude_ambiguous=True))
choose("c-truncate", "Cut 'Meeting moved to Thursday due to the holiday' down to 20 characters with an ellipsis.",
       TEXT[:4], call("truncate_text", "Meeting moved to Th…", {"ellipsis": True},
                      text="Meeting moved to Thursday due to the holiday", max_length=20))
choose("c-replace-case", "In 'cat, Cat, CAT' replace 'cat' with 'dog', matching case exactly.",
       ["change_case", "find_and_replace", "count_words"],
       call("find_and_replace", "dog, Cat, CAT", {"options": with_defaults({"case_sensitive": True},
                                                                           whole_words=False, max_replacements=0)},
            text="cat, Cat, CAT", find="cat", replace="dog"))

# several calls at once: 2-4 independent calls, all needed
parallel("p-len-two", "Convert 5 km and 12 miles to meters.", ["convert_length"],
         call("convert_length", "5000.000 m", PRECISION, value=5, from_unit="km", to_unit="m"),
         call("convert_length", "19312.128 m", PRECISION, value=12, from_unit="mi", to_unit="m"))
parallel("p-temp-three", "Convert 0 °C, 37 °C and 100 °C to Fahrenheit.", ["convert_temperature"],
         *(call("convert_temperature", f"{c * 9 / 5 + 32:g} °F", value=c, from_scale="celsius",
                to_scale="fahrenheit") for c in (0, 37, 100)))
parallel("p-mass-both-ways", "How many pounds are 2 kg, and how many kilograms are 150 lb?", ["convert_mass"],
         call("convert_mass", "4.409 lb", value=2, from_unit="kg", to_unit="lb"),
         call("convert_mass", "68.039 kg", value=150, from_unit="lb", to_unit="kg"))
parallel("p-fx-three", "Convert 100 EUR to US dollars, to British pounds and to Japanese yen.", ["convert_currency"],
         *(call("convert_currency", text, amount=100, from_currency="EUR", to_currency=code)
           for code, text in (("USD", "108.10 USD"), ("GBP", "84.30 GBP"), ("JPY", "16245 JPY"))))
parallel("p-weekdays", "On which days of the week do 2025-12-25 and 2026-01-01 fall?", ["day_of_week", "add_to_date"],
         call("day_of_week", "Thursday", date="2025-12-25"), call("day_of_week", "Thursday", date="2026-01-01"))
parallel("p-tz-two", "The launch is on 2026-06-01 at 18:00 in Paris (Europe/Paris). What time is that in New York "
         "(America/New_York) and in Sydney (Australia/Sydney)?", ["convert_time_zone"],
         *(call("convert_time_zone", text, datetime=alternatives("2026-06-01T18:00", "2026-06-01T18:00:00"),
                from_zone="Europe/Paris", to_zone=zone)
           for zone, text in (("America/New_York", "2026-06-01T12:00"), ("Australia/Sydney", "2026-06-02T02:00"))))
parallel("p-circles", "What are the areas of circles with radii 1, 2.5 and 10?", ["circle_area", "rectangle_area"],
         *(call("circle_area", text, radius=r) for r, text in ((1, "3.142"), (2.5, "19.635"), (10, "314.159"))))
parallel("p-miles-and-fahrenheit", "Convert 10 miles to kilometers and 75 °F to Celsius.", UNITS,
         call("convert_length", "16.093 km", PRECISION, value=10, from_unit="mi", to_unit="km"),
         call("convert_temperature", "23.9 °C", value=75, from_scale="fahrenheit", to_scale="celsius"))
parallel("p-date-and-weekday", "What date is 100 days after 2026-01-01, and what day of the week is 2026-01-01?",
         DATES[:3], call("add_to_date", "2026-04-11", date="2026-01-01", amount=100, unit="days"),
         call("day_of_week", "Thursday", date="2026-01-01"))
parallel("p-loan-terms", "Compare the monthly payments on a 200,000 loan at 4.5% over 180 months and over 360 "
         "months.", ["loan_payment", "compound_interest"],
         call("loan_payment", "1529.99", principal=200000, annual_rate=0.045, term_months=180),
         call("loan_payment", "1013.37", principal=200000, annual_rate=0.045, term_months=360))
parallel("p-interest-rates", "How much does 1,000 become after 20 years at 3% and at 7% a year, compounded yearly?",
         ["compound_interest"],
         call("compound_interest", "1806.11", principal=1000, annual_rate=0.03, years=20, compounds_per_year=1),
         call("compound_interest", "3869.68", principal=1000, annual_rate=0.07, years=20, compounds_per_year=1))
parallel("p-case-two", "Write 'user account id' in camelCase and in kebab-case.", ["change_case", "slugify"],
         call("change_case", "userAccountId", text="user account id", style="camel"),
         call("change_case", "user-account-id", text="user account id", style="kebab"))
parallel("p-words-two", "Count the words in 'Hello world' and in 'One two three four five'.", ["count_words"],
         call("count_words", "2", {"unique": False}, text="Hello world"),
         call("count_words", "5", {"unique": False}, text="One two three four five"))
parallel("p-sort-and-sum", "For the numbers 9, 2, 7 and 4: sort them in ascending order, and give me their sum.",
         LISTS[:2], call("sort_numbers", "[2, 4, 7, 9]", {"order": "ascending"}, numbers=[9, 2, 7, 4]),
         call("list_statistics", '{"sum": 22}', numbers=[9, 2, 7, 4], measures=["sum"]))
parallel("p-rect-and-circle", "What is the area of a 3 by 4 rectangle, and of a circle of radius 3?", SHAPES[:3],
         call("rectangle_area", "12", width=alternatives(3, 4), height=alternatives(4, 3)),
         call("circle_area", "28.274", radius=3))
parallel("p-distances", "How far is (0, 0) from (3, 4), and how far is (2, -1) from (-4, 7)?",
         ["distance_between_points"],
         call("distance_between_points", "5.0", a=alternatives({"x": 0, "y": 0}, {"x": 3, "y": 4}),
              b=alternatives({"x": 3, "y": 4}, {"x": 0, "y": 0})),
         call("distance_between_points", "10.0", a=alternatives({"x": 2, "y": -1}, {"x": -4, "y": 7}),
              b=alternatives({"x": -4, "y": 7}, {"x": 2, "y": -1})))
parallel("p-fx-and-tax", "Convert 50 GBP to EUR, and add 20% tax to a price of 42.00.",
         ["convert_currency", "sales_tax", "percent_change"],
         call("convert_currency", "59.30 EUR", amount=50, from_currency="GBP", to_currency="EUR"),
         call("sales_tax", '{"net": 42.00, "tax": 8.40, "gross": 50.40}', {"prices_include_tax": False}, amount=42,
              rate=0.2))
parallel("p-split-two", "Split 96 among 3 people, and split 150 among 4 people with a 10% tip.", ["split_bill"],
         call("split_bill", "32.00 each", {"tip_rate": 0}, total=96, people=3),
         call("split_bill", "41.25 each", total=150, people=4, tip_rate=0.1))
parallel("p-ship-two", "Quote standard shipping for a 1 kg parcel of 30 × 20 × 10 cm to France and to Japan.",
         ["shipping_quote"],
         *(call("shipping_quote", text, {"service": "standard"}, weight_kg=1,
                package={"length_cm": 30, "width_cm": 20, "height_cm": 10}, destination_country=code)
           for code, text in (("FR", "9.90 EUR, 2-4 days"), ("JP", "27.50 EUR, 7-12 days"))))
parallel("p-roman-four", "Write 4, 9, 14 and 2024 in Roman numerals.", ["to_roman"],
         *(call("to_roman", text, number=n) for n, text in ((4, "IV"), (9, "IX"), (14, "XIV"), (2024, "MMXXIV"))))
parallel("p-days-leap", "How many days are there from 2026-01-01 to 2026-03-01, and from 2024-01-01 to 2024-03-01?",
         ["days_between", "add_to_date"],
         call("days_between", "59 days", CALENDAR, start_date="2026-01-01", end_date="2026-03-01"),
         call("days_between", "60 days", CALENDAR, start_date="2024-01-01", end_date="2024-03-01"))
parallel("p-palindromes", "Are 'racecar' and 'Was it a car or a cat I saw' palindromes (ignoring case and spaces)?",
         ["is_palindrome", "change_case"],
         call("is_palindrome", "true", {"ignore_case": True, "ignore_punctuation": True}, text="racecar"),
         call("is_palindrome", "true", {"ignore_case": True, "ignore_punctuation": True},
              text=alternatives("Was it a car or a cat I saw", "Was it a car or a cat I saw?")))
parallel("p-slug-and-truncate", "Make a URL slug from 'Summer Sale 2026', and shorten 'Unbelievable discounts on "
         "everything' to 15 characters.", TEXT[3:],
         call("slugify", "summer-sale-2026", {"separator": "-"}, text="Summer Sale 2026"),
         call("truncate_text", "Unbelievable d…", {"ellipsis": True}, text="Unbelievable discounts on everything",
              max_length=15))
parallel("p-round-and-format", "Round 3.14159 to 3 decimals, rounding half up, and format 0.075 as a percentage "
         "with 1 decimal.", ["round_number", "format_number"],
         call("round_number", "3.142", {"mode": "half_up"}, value=3.14159, decimals=3),
         call("format_number", "7.5%", EN_US, value=0.075, style="percent", decimals=1))
parallel("p-flights-return", "Search flights from SFO to SEA on 2026-04-10 and back from SEA to SFO on 2026-04-14, "
         "economy, one adult.", ["search_flights", "create_event"],
         *(call("search_flights", text, {"passengers": with_defaults({"adults": 1}, children=0),
                                         "cabin": "economy"},
                origin=a, destination=b, depart_date=day)
           for a, b, day, text in (("SFO", "SEA", "2026-04-10", "AS 311 08:00-10:10, 129 USD"),
                                   ("SEA", "SFO", "2026-04-14", "AS 328 17:45-19:55, 141 USD"))))
parallel("p-events-two", "Create two 60-minute events: 'Standup' on 2026-02-02 at 09:00 and 'Retro' on 2026-02-06 "
         "at 15:00.", ["create_event", "add_to_date"],
         call("create_event", "created event evt_6001", title="Standup", start="2026-02-02T09:00", duration_minutes=60),
         call("create_event", "created event evt_6002", title="Retro", start="2026-02-06T15:00", duration_minutes=60))
parallel("p-kitchen", "Convert 2 cups to milliliters and 250 g to ounces.", UNITS[1:],
         call("convert_volume", "473.18 ml", value=2, from_unit="cup", to_unit="ml"),
         call("convert_mass", "8.818 oz", value=250, from_unit="g", to_unit="oz"))
parallel("p-changes-three", "What is the percentage change from 80 to 100, from 100 to 80, and from 50 to 75?",
         ["percent_change", "sales_tax"],
         *(call("percent_change", text, old_value=a, new_value=b)
           for a, b, text in ((80, 100, "25.0%"), (100, 80, "-20.0%"), (50, 75, "50.0%"))))
parallel("p-passwords", "Generate two passwords: a 12-character one of digits only, and a 24-character one using "
         "all four character sets.", ["generate_password"],
         call("generate_password", "582039174626", {"exclude_ambiguous": False}, length=12,
              character_sets=["digits"]),
         call("generate_password", "pX7$kR2!vN9@tQ4#mL8&cB3%", {"exclude_ambiguous": False,
                                                                "character_sets": any_order(CHARACTER_SETS)},
              length=24))
parallel("p-dedupe-and-chunk", "Remove the duplicates from the list x, y, x, z, and split the list mon, tue, wed, "
         "thu, fri, sat into pairs.", LISTS[2:],
         call("remove_duplicates", '["x", "y", "z"]', {"case_sensitive": True}, items=["x", "y", "x", "z"]),
         call("chunk_list", '[["mon", "tue"], ["wed", "thu"], ["fri", "sat"]]',
              items=["mon", "tue", "wed", "thu", "fri", "sat"], size=2))
parallel("p-kelvin-two", "Convert 300 K to Celsius and to Fahrenheit.", ["convert_temperature"],
         call("convert_temperature", "26.85 °C", value=300, from_scale="kelvin", to_scale="celsius"),
         call("convert_temperature", "80.33 °F", value=300, from_scale="kelvin", to_scale="fahrenheit"))
parallel("p-dates-three", "Which dates are 30, 60 and 90 days after 2026-03-15?", ["add_to_date", "days_between"],
         *(call("add_to_date", text, date="2026-03-15", amount=n, unit="days")
           for n, text in ((30, "2026-04-14"), (60, "2026-05-14"), (90, "2026-06-13"))))
parallel("p-fx-history", "What were 500 US dollars worth in euros on 2020-03-15 and on 2025-03-15?",
         ["convert_currency"],
         call("convert_currency", "448.60 EUR", amount=500, from_currency="USD", to_currency="EUR", date="2020-03-15"),
         call("convert_currency", "459.30 EUR", amount=500, from_currency="USD", to_currency="EUR", date="2025-03-15"))

# no function fits: the right reply answers (or declines) without calling anything
none("n-capital", "What is the capital of Australia?", ["convert_length", "day_of_week"])
none("n-litres-to-gallons", "Convert 5 liters to US gallons.", ["convert_length", "convert_mass"])
none("n-weather", "What is the weather like in Madrid right now?", ["convert_temperature", "convert_time_zone"])
none("n-stock", "What is Apple's share price today?", ["convert_currency", "compound_interest"])
none("n-translate", "Translate 'good morning' into Spanish.", ["change_case", "count_words"])
none("n-poem", "Write a two-line poem about autumn.", ["count_words", "truncate_text"])
none("n-radians", "Convert 90 degrees to radians.", ["convert_temperature", "convert_length"])
none("n-email", "Send an email to bob@example.com saying I will be late.", ["create_event", "search_flights"])
none("n-hotel", "Book a hotel room in Rome from 2026-05-01 to 2026-05-04.", ["search_flights", "convert_currency"])
none("n-pressure", "Convert 2 bar to psi.", ["convert_mass", "convert_temperature", "convert_volume"])
none("n-history", "In which year did the Berlin Wall fall?", ["day_of_week", "days_between"])
none("n-square-root", "What is the square root of 2, to 10 decimal places?", ["round_number", "format_number"])
none("n-sphere", "What is the volume of a sphere with a radius of 3 cm?", ["cylinder_volume", "circle_area"])
none("n-reverse", "Reverse the string 'stressed'.", ["change_case", "is_palindrome"])
none("n-grammar", "Fix the grammar of 'he go to school yesterday'.", ["change_case", "count_words"])
none("n-prime", "Is 97 a prime number?", ["round_number", "list_statistics"])
none("n-calories", "How many calories are there in a banana?", ["convert_mass", "convert_volume"])
none("n-flight-status", "Is flight BA117 on time today?", ["search_flights", "convert_time_zone"])
none("n-cancel", "Cancel my 'Design review' meeting.", ["create_event"])
none("n-bitcoin", "What is one bitcoin worth in US dollars?", ["convert_currency"])
none("n-hexagon", "What is the area of a regular hexagon with sides of 4 cm?", ["rectangle_area", "circle_area"])
none("n-leap-year", "Was 1900 a leap year?", ["convert_time_zone", "count_words"])
none("n-joke", "Tell me a joke about programmers.", ["generate_password", "slugify"])
none("n-population", "What is the population of Canada?", ["shipping_quote", "convert_currency"])
none("n-sort-words", "Sort the words pear, apple and fig alphabetically.", ["sort_numbers", "list_statistics"])
none("n-eiffel", "Who designed the Eiffel Tower?", ["convert_length", "day_of_week", "to_roman"])
none("n-old-currency", "Which currency did Germany use before the euro?", ["convert_currency"])
none("n-synonym", "Give me a synonym for 'happy'.", ["find_and_replace", "change_case"])
none("n-egg", "How long should I boil an egg for a soft yolk?", ["convert_temperature", "add_to_date"])
none("n-time-now", "What time is it right now in Tokyo?", ["convert_time_zone"])
none("n-mortgage-advice", "Should I choose a fixed-rate or a variable-rate mortgage?",
     ["loan_payment", "compound_interest"])
none("n-road-distance", "How far is Paris from Berlin by road?", ["distance_between_points", "convert_length"])
none("n-password-strength", "Is 'hunter2' a strong password?", ["generate_password"])
none("n-hamlet", "Summarise the plot of Hamlet in one sentence.", ["truncate_text", "count_words"])


def main() -> None:
    text = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in ITEMS)
    OUT.write_text(text, encoding="utf-8")
    print(f"{OUT}: {len(ITEMS)} items")


if __name__ == "__main__":
    main()
