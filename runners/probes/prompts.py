"""Prompts of an exact token length, built with the server's own tokenizer.

runners/ carries no tokenizer: vLLM serves `POST /tokenize {"model", "prompt", "add_special_tokens"}`
-> {"count", "max_model_len", "tokens"} and `POST /detokenize {"model", "tokens"}` -> {"prompt"}.

A prompt of P tokens means P as the server counts a completion's prompt (`usage.prompt_tokens`:
special tokens such as BOS included, which /tokenize adds by default). It is built
deterministically, so every run of a benchmark sends the same text: the seed text is repeated
until it is long enough, tokenized without special tokens, cut to P minus the special tokens,
detokenized, and the text's count checked with /tokenize again. A cut can merge with its
neighbour when re-tokenized (a word split mid-way, say), so cuts next to the first are tried in
a fixed order (P, P - 1, P + 1, ...; MAX_CUT_SHIFT either way): the first whose text counts
exactly P wins. When none does, ProbeError says which counts the cuts gave (never a prompt of
another length). A prompt that, with the tokens to generate, does not fit the model's context
(`max_model_len`) is a ProbeError before any timed request.
"""
from __future__ import annotations

import math

from runners.probes.client import CompletionClient, ProbeError, clip

MAX_CUT_SHIFT = 4


def _post_json(api: CompletionClient, path: str, body: dict) -> dict:
    r = api.post(path, json_body=body)
    if r.status_code != 200:
        raise ProbeError(f"HTTP {r.status_code} from POST {api.url(path)} (needed to build a prompt of an exact "
                         f"token length): {clip(r.text, 1000)}", received={"status": r.status_code, "body": clip(r.text)})
    try:
        obj = r.json()
    except ValueError:
        raise ProbeError(f"{path} answered with non-JSON", received=clip(r.text)) from None
    if not isinstance(obj, dict):
        raise ProbeError(f"{path} answered with a JSON value that is not an object", received=clip(r.text))
    return obj


def tokenize(api: CompletionClient, model: str, text: str, *, special: bool = True) -> dict:
    """The server's /tokenize answer for TEXT (with or without special tokens)."""
    obj = _post_json(api, "/tokenize", {"model": model, "prompt": text, "add_special_tokens": special})
    if not isinstance(obj.get("tokens"), list):
        raise ProbeError("/tokenize answered without a 'tokens' list", received=clip(str(obj)))
    return obj


def detokenize(api: CompletionClient, model: str, ids: list[int]) -> str:
    obj = _post_json(api, "/detokenize", {"model": model, "tokens": ids})
    if not isinstance(obj.get("prompt"), str):
        raise ProbeError("/detokenize answered without a 'prompt' string", received=clip(str(obj)))
    return obj["prompt"]


def cut_order(cut: int) -> list[int]:
    """The cuts tried, in order: CUT, CUT - 1, CUT + 1, ... (MAX_CUT_SHIFT either way, never < 1)."""
    order = [cut]
    for d in range(1, MAX_CUT_SHIFT + 1):
        order += [c for c in (cut - d, cut + d) if c >= 1]
    return order


def exact_prompt(api: CompletionClient, model: str, prompt_tokens: int, max_tokens: int, seed: str) -> dict:
    """{"prompt", "prompt_tokens", "cut", "max_model_len"}: a text the server counts as exactly
    PROMPT_TOKENS tokens, built from SEED (see the module doc). ProbeError when it cannot be
    built or does not fit the context with MAX_TOKENS generated."""
    if not seed.strip():
        raise ValueError("the seed text of an exact-length prompt must not be empty")
    with_special = tokenize(api, model, seed)
    plain = len(tokenize(api, model, seed, special=False)["tokens"])
    special = max(0, len(with_special["tokens"]) - plain)
    context = with_special.get("max_model_len")
    if isinstance(context, int) and prompt_tokens + max_tokens > context:
        raise ProbeError(f"a prompt of {prompt_tokens} tokens plus {max_tokens} tokens to generate does not fit the "
                         f"model's context of {context} tokens (max_model_len)",
                         received={"prompt_tokens": prompt_tokens, "max_tokens": max_tokens, "max_model_len": context})
    need = prompt_tokens - special
    if need < 1 or plain < 1:
        raise ProbeError(f"cannot build a prompt of {prompt_tokens} tokens: the server adds {special} special "
                         f"token(s) to every prompt", received={"special_tokens": special})
    text = " ".join([seed] * (math.ceil((need + MAX_CUT_SHIFT) / plain) + 1))
    ids = tokenize(api, model, text, special=False)["tokens"]
    tried = {}
    for cut in cut_order(need):
        prompt = detokenize(api, model, ids[:cut])
        tried[cut] = len(tokenize(api, model, prompt)["tokens"])
        if tried[cut] == prompt_tokens:
            return {"prompt": prompt, "prompt_tokens": prompt_tokens, "cut": cut, "max_model_len": context}
    raise ProbeError(f"cannot build a prompt of exactly {prompt_tokens} tokens from the seed text: cutting it at "
                     f"{need} tokens (and {MAX_CUT_SHIFT} either way) gave counts {tried}", received={"cuts": tried})
