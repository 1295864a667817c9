"""What a stage's LLM calls cost: tokens (and money, when the user gives prices) in total and per unit of output.

Two views, both from the client's stats (`ClientStats` as a dict, summed over a stage's batches):
- `tokens`: every answer the stage used, cached ones included — what the data cost to make;
- `sent`: the requests this run sent — this run's bill (0 on a re-run from the response cache).
Prices are settings (`LLMSettings.price_*_per_million`), never built in: endpoints and contracts differ.
"""

from __future__ import annotations

from typing import Any


def _money(prompt: int, completion: int, prices: tuple[float | None, float | None]) -> float | None:
    if prices[0] is None and prices[1] is None:
        return None
    return round((prompt * (prices[0] or 0.0) + completion * (prices[1] or 0.0)) / 1e6, 6)


def llm_cost(stats: dict[str, Any], units: int, unit: str,
             prices: tuple[float | None, float | None] = (None, None)) -> dict[str, Any]:
    """{"unit", "units", "prompt_tokens", "completion_tokens", "sent_prompt_tokens", "sent_completion_tokens",
    "tokens_per_unit", "money", "money_sent", "money_per_unit", "prices_per_million"}. `units`: accepted outputs
    (complete triples, labeled pairs); `prices`: (prompt, completion) per million tokens, None when not given."""
    sent = (int(stats.get("prompt_tokens", 0)), int(stats.get("completion_tokens", 0)))
    used = (sent[0] + int(stats.get("cached_prompt_tokens", 0)), sent[1] + int(stats.get("cached_completion_tokens", 0)))
    money = _money(*used, prices)
    return {
        "unit": unit, "units": units,
        "prompt_tokens": used[0], "completion_tokens": used[1],
        "sent_prompt_tokens": sent[0], "sent_completion_tokens": sent[1],
        "tokens_per_unit": round(sum(used) / units, 1) if units else None,
        "prices_per_million": {"prompt": prices[0], "completion": prices[1]},
        "money": money, "money_sent": _money(*sent, prices),
        "money_per_unit": round(money / units, 8) if money is not None and units else None,
    }


def prices_of(llm) -> tuple[float | None, float | None]:
    """(prompt, completion) prices per million tokens of an `LLMSettings`."""
    return llm.price_prompt_per_million, llm.price_completion_per_million


def cost_line(cost: dict[str, Any]) -> str:
    """One line for a stage summary or the quality table."""
    line = (f"{cost['prompt_tokens']:,} prompt + {cost['completion_tokens']:,} completion tokens "
            f"({cost['tokens_per_unit'] if cost['tokens_per_unit'] is not None else 'n/a'} per {cost['unit']}; "
            f"sent by this run: {cost['sent_prompt_tokens']:,} + {cost['sent_completion_tokens']:,})")
    if cost["money"] is not None:
        line += f"; {cost['money']:.4f} at the given prices ({cost['money_per_unit'] or 0:.6f} per {cost['unit']}, " \
                f"this run {cost['money_sent']:.4f})"
    return line
