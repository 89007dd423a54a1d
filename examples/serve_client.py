"""A tool loop of the openai SDK's kind, run by the client, against `agent serve`: the model asks for calls, this
script runs them and sends the results back as tool messages, until the model answers.

    agent serve --upstream-url URL --model NAME      # or: agent serve --local
    python examples/serve_client.py "What is (12 + 30) * 7?"

AGENT_SERVE_URL (default http://127.0.0.1:8765/v1) and AGENT_SERVE_API_KEY say where serve is and its key.
"""
import json
import os
import sys

from openai import OpenAI

TOOLS = [{"type": "function", "function": {
    "name": name, "description": f"{name.title()} two numbers.",
    "parameters": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                   "required": ["a", "b"]}}} for name in ("add", "multiply")]
RUN = {"add": lambda a, b: a + b, "multiply": lambda a, b: a * b}

client = OpenAI(base_url=os.environ.get("AGENT_SERVE_URL", "http://127.0.0.1:8765/v1"),
                api_key=os.environ.get("AGENT_SERVE_API_KEY", "none"))
messages = [{"role": "user", "content": sys.argv[1] if len(sys.argv) > 1 else "What is (12 + 30) * 7?"}]
for _ in range(10):
    response = client.chat.completions.with_raw_response.create(model="any", messages=messages, tools=TOOLS)
    completion = response.parse()
    message = completion.choices[0].message
    print(f"[{completion.choices[0].finish_reason}, {response.headers.get('x-agent-reasks')} re-asks, "
          f"{completion.usage.total_tokens if completion.usage else 'uncounted'} tokens]")
    if not message.tool_calls:
        print(message.content)
        break
    messages.append(message.model_dump(exclude_none=True))
    for call in message.tool_calls:
        arguments = json.loads(call.function.arguments)
        result = RUN[call.function.name](**arguments)
        print(f"  {call.function.name}({arguments}) = {result}")
        messages.append({"role": "tool", "tool_call_id": call.id, "content": str(result)})
