"""The one palette of every figure (widgets, static pictures, notebooks): Okabe & Ito's colours, which stay
distinct for red-green colour-blind readers; what must never be confused (useful vs wasted) also differs in
lightness, and static bars add a hatch.

    from tinyserve_widgets.palette import PALETTE, HATCH
    ax.barh(y, w, color=PALETTE["wasted"], hatch=HATCH["wasted"])
"""
from __future__ import annotations

# Okabe, M. & Ito, K. (2008), "Color Universal Design": https://jfly.uni-koeln.de/color/
OKABE_ITO = {"black": "#000000", "orange": "#E69F00", "sky_blue": "#56B4E9", "bluish_green": "#009E73",
             "yellow": "#F0E442", "blue": "#0072B2", "vermillion": "#D55E00", "reddish_purple": "#CC79A7"}

PALETTE = {
    "idle": "#e8e8e8",  # light grey: nothing computed
    "prefill": OKABE_ITO["blue"],
    "padding": OKABE_ITO["yellow"],
    "useful": OKABE_ITO["bluish_green"],  # a decode whose token is kept
    "wasted": OKABE_ITO["vermillion"],  # a decode for a request already done
    "waiting": "#999999",
    "idle_bar": "#bdbdbd",  # idle in a stacked bar (darker than the timeline's idle, visible on white)
    "kv_reserved": OKABE_ITO["sky_blue"],
    "kv_used": OKABE_ITO["blue"],
    "newcomer": OKABE_ITO["vermillion"],  # a newcomer's time to first token
    "accent": OKABE_ITO["orange"],
    "other": OKABE_ITO["reddish_purple"],
    "ink": "#333333",
}
HATCH = {"padding": "..", "wasted": "//", "idle_bar": ""}  # matplotlib hatches for bars; plotly: PATTERN
PATTERN = {"padding": ".", "wasted": "/"}  # plotly bar marker.pattern.shape
SERIES = [PALETTE[k] for k in ("kv_used", "accent", "useful", "other", "wasted", "ink")]  # lines compared, in order
