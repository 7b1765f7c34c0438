"""The steady window and the burst flags of one streamed repeat (pure: arrival times in, timing
out). runners.probes.decode's module doc defines TTFT, decode tok/s, inter-token latency, a
held-back start or end and a burst; steady_window says how each is told from the arrivals.

    timing = analyze_repeat(record)   # record: runners.probes.streamed_request.stream_once's
    timing["decode_tok_s"], timing["flag"], timing["held_back"]
"""
from __future__ import annotations

from runners.analysis import stats

# Absurd-arrival detection (see the module doc of runners.probes.decode): a repeat is "burst" when its
# token chunks arrive (median gap) closer together than any engine decodes one request, or when they are
# sub-millisecond apart and median gap x chunks is a tiny fraction of the wait for the first.
BURST_MEDIAN_GAP_S = 50e-6
BURST_WINDOW_FRACTION = 0.05
BURST_WINDOW_MEDIAN_GAP_S = 1e-3
BURST_MIN_CHUNKS = 4
# Held-back start/end (see steady_window): a first (or last) arrival this late against the
# steady pace, by at least this many tokens, is a burst (a delayed ACK holds up to 40 ms; a
# client's scheduling jitter on a loaded host is a few ms, and correcting it is harmless);
# a steady window with fewer tokens than this is flagged instead of measured.
HELD_MIN_LATE_S = 0.004
HELD_MIN_TOKENS = 0.5
HELD_MIN_WINDOW_TOKENS = 4
# A chunk arrived "together" with the one before it when its gap is under this fraction of one
# token's time at the stream's pace, whatever it carries. Only such chunks can put a stream ahead
# of its pace: a hold releases its chunks at once, while a pace that drifts (an eager engine's
# steps slow down or speed up along the stream, by 30-40% seen) never brings a gap near half the
# pace, and a chunk of two tokens one step after the last (vLLM's final chunk on an H200) is late
# by a step, not early.
HELD_TOGETHER_FRACTION = 0.5


def analyze_repeat(rec: dict) -> dict:
    """Timing of one repeat from its raw record (definitions in the module doc)."""
    chunks = rec["chunks"]
    t_send = rec["t_send"]
    n = rec["n_tokens"]
    gaps = [cur["t"] - prev["t"] for prev, cur in zip(chunks, chunks[1:])]
    lo, hi = steady_window(chunks)
    window = chunks[hi]["t"] - chunks[lo]["t"]
    tokens = sum(c["k"] for c in chunks[lo + 1:hi + 1])  # the tokens that arrived inside the window
    decode_tok_s = tokens / window if tokens > 0 and window > 0 else None
    whole = chunks[-1]["t"] - chunks[0]["t"]
    whole_tokens = n - chunks[0]["k"]
    itl: list[float] = []
    for prev, cur in zip(chunks[lo:hi], chunks[lo + 1:hi + 1]):
        itl.extend([(cur["t"] - prev["t"]) / cur["k"]] * cur["k"])
    held = None
    if (lo, hi) != (0, len(chunks) - 1):
        held = {"start_chunks": lo, "end_chunks": len(chunks) - 1 - hi, "window_tokens": tokens,
                "first_arrival_ms": (chunks[0]["t"] - t_send) * 1e3}
    flag, why = _flag(chunks, gaps, lo, hi, tokens, n, decode_tok_s, chunks[0]["t"] - t_send)
    ids = _ids_of(chunks)
    return {
        "decode_tok_s": decode_tok_s,
        "whole_stream_tok_s": whole_tokens / whole if whole_tokens > 0 and whole > 0 else None,
        "ttft_ms": (chunks[0]["t"] - t_send) * 1e3,
        "n_tokens": n,
        "chunks": len(chunks),
        "first_chunk_tokens": chunks[0]["k"],
        "max_chunk_tokens": max(c["k"] for c in chunks),
        "decode_window_ms": window * 1e3,
        "itl_s": itl,
        "held_back": held,
        "flag": flag,
        "ttft_flag": flag or ("held_back" if held and held["start_chunks"] else ""),
        "suspect": why,
        "ids": ids,
        "text": "".join(c["text"] for c in chunks),
        "server_request_metrics": rec["server_request_metrics"],
        "response_id": rec.get("response_id"),
        "prompt_tokens": rec["prompt_tokens"],
        "count_sources": rec["count_sources"],
    }


def steady_window(chunks: list[dict]) -> tuple[int, int]:
    """Indices (lo, hi) of the chunks whose arrivals are real; (0, len - 1) for a healthy stream.

    A held-back start (a first chunk that waited, for a delayed ACK say, and was released with
    the ones generated meanwhile) has two signs, both required (_held_start): a run of chunks
    from the first that arrived together (gaps under HELD_TOGETHER_FRACTION of the stream's pace
    m, the seconds per token over its middle third, _pace), and a first chunk that arrived late
    against the pace of the chunks after the run, by HELD_MIN_LATE_S and HELD_MIN_TOKENS tokens
    at least. The window then starts two chunks after the run (the first one after a burst may
    still have waited for the burst's ACK: seen, +1% on one repeat in ten). A burst over more
    than a third of the chunks is only partly corrected: the window then starts inside it (a rate
    too high, which _burst flags when most gaps are tiny). A held-back end is the mirror
    (_held_end): a closing run of chunks that arrived together, and a last chunk late against the
    pace before the run; the window then ends at the chunk before the run. A pace that drifts
    along the stream (an eager engine's, 30-40% from one end to the other) has no such run; a
    chunk that reached the client late and arrived with the next, on time, is not late at the
    edge: both are timed whole."""
    n = len(chunks)
    if n < 4:
        return 0, n - 1
    m = _pace(chunks)
    if m <= 0:  # everything in one read: _burst flags it
        return 0, n - 1
    t, k = [c["t"] for c in chunks], [c["k"] for c in chunks]
    third = (n + 2) // 3
    b = _held_start(t, k, m, third)
    lo = min(b + 2, n - 1) if b else 0
    r = _held_end(t, k, m, third)
    hi = r - 1 if r else n - 1
    return lo, max(hi, lo)


def _pace(chunks: list[dict]) -> float:
    """Seconds per token over the middle third of the chunks: away from both ends, where bursts
    are, and over a span rather than a median gap (a descheduled client reads chunks in bunches,
    which makes most single gaps tiny while the span stays right)."""
    a, b = len(chunks) // 3, (2 * len(chunks)) // 3
    tokens = sum(c["k"] for c in chunks[a + 1:b + 1])
    return (chunks[b]["t"] - chunks[a]["t"]) / tokens if tokens else 0.0


def _together(t: list[float], j: int, m: float) -> bool:
    """Chunk J arrived together with chunk J - 1."""
    return t[j] - t[j - 1] < HELD_TOGETHER_FRACTION * m


def _late_enough(late: float, m: float) -> bool:
    return late >= HELD_MIN_LATE_S and late >= HELD_MIN_TOKENS * m


def _held_start(t: list[float], k: list[int], m: float, third: int) -> int:
    """Index b of the last chunk of a held-back start (chunks 0..b arrived together, chunk 0 late
    against the pace from chunk b + 1 on), else 0. K[j]: tokens chunk j carried."""
    b = 0
    while b + 1 < third and _together(t, b + 1, m):
        b += 1
    if b == 0:
        return 0
    expected_t0 = t[b + 1] - m * sum(k[1:b + 2])  # where chunk b + 1's pace puts chunk 0
    return b if _late_enough(t[0] - expected_t0, m) else 0


def _held_end(t: list[float], k: list[int], m: float, third: int) -> int:
    """Index r of the first chunk of a held-back end (chunks r..n-1 arrived together, the last
    late against the pace up to chunk r - 1), else 0."""
    n = len(t)
    r = n - 1
    while r > n - third and _together(t, r, m):
        r -= 1
    if r == n - 1:
        return 0
    expected_last = t[r - 1] + m * sum(k[r:])  # where chunk r - 1's pace puts the last one
    return r if _late_enough(t[-1] - expected_last, m) else 0


def _flag(chunks, gaps, lo, hi, tokens, n, decode_tok_s, ttft) -> tuple[str, str | None]:
    """('', None) for a clean repeat, else (flag, why)."""
    why = _burst(chunks, gaps, ttft)
    if why:
        return "burst", why
    if decode_tok_s is None:
        if (lo, hi) != (0, len(chunks) - 1):
            return "held_back", f"held back: no chunk arrived at its own pace ({len(chunks)} chunks)"
        return "no_rate", "all tokens arrived in a single network read"
    if tokens < HELD_MIN_WINDOW_TOKENS:
        return "held_back", (f"held back: only {tokens} of {n} tokens arrived at their own pace (chunks "
                             f"{lo}..{hi} of {len(chunks)}); the rest came in bursts")
    return "", None


def _burst(chunks: list[dict], gaps: list[float], ttft: float) -> str | None:
    """Why the arrivals look held back and released at once (see the module doc), or None."""
    if len(chunks) < BURST_MIN_CHUNKS:
        return None
    med_gap = stats.median(gaps)
    # the decode window the typical gap implies (robust to one stall inside a burst)
    implied_window = med_gap * (len(chunks) - 1)
    if med_gap < BURST_MEDIAN_GAP_S or (med_gap < BURST_WINDOW_MEDIAN_GAP_S
                                        and implied_window < BURST_WINDOW_FRACTION * ttft):
        return (f"burst: {len(chunks)} chunks arrived {med_gap * 1e6:.1f} us apart (median) after a "
                f"{ttft * 1e3:.1f} ms wait for the first; the stream was held back, so client "
                "timestamps do not reflect decode")
    return None


def _ids_of(chunks: list[dict]) -> list[int] | None:
    """All token ids in order, or None when any chunk lacked them."""
    if any(c["ids"] is None for c in chunks):
        return None
    return [i for c in chunks for i in c["ids"]]

