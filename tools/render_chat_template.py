#!/usr/bin/env python3
"""Renders a GGUF's tokenizer.chat_template with jinja2 for the conversations that
tests/chat_template_test.cpp spells out by hand, so the two can be compared.

Usage: python3 tools/render_chat_template.py MODEL.gguf   (needs the gguf and jinja2 packages)
"""
import json
import sys

import gguf
import jinja2

CONVERSATIONS = [
    ([{"role": "user", "content": "Hi"}], True),
    ([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}], True),
    ([{"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "4"},
      {"role": "user", "content": "And 3+3?\nThanks"}], True),
    ([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}], False),
    ([], True),
    ([{"role": "assistant", "content": "ok"}], False),
]


def main():
    reader = gguf.GGUFReader(sys.argv[1])
    source = reader.fields["tokenizer.chat_template"].contents()
    template = jinja2.Environment().from_string(source)
    for messages, add_generation_prompt in CONVERSATIONS:
        text = template.render(messages=messages, add_generation_prompt=add_generation_prompt)
        print(json.dumps(text))


if __name__ == "__main__":
    main()
