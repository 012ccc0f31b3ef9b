"""Link presets: the shipped two load with their published numbers, a transfer costs latency + bytes / bandwidth,
and a bad file or name is one clear line, in English or 繁體中文."""
from __future__ import annotations

import dataclasses
import json

import pytest

import tinyserve
from tinyserve import lang
from tinyserve.cost.links import LinkPreset, get_link, list_links, load_link, transfer_s
from tinyserve.errors import TinyserveError


@pytest.fixture
def zh():
    tinyserve.set_language("zh-TW")
    yield
    tinyserve.set_language("en")


def write(tmp_path, **changes) -> str:
    """A copy of ib-ndr's JSON with fields changed (None: removed), as a path."""
    d = dataclasses.asdict(get_link("ib-ndr"))
    d.update(changes)
    d = {k: v for k, v in d.items() if v is not None}
    path = tmp_path / "mine.json"
    path.write_text(json.dumps(d), encoding="utf-8")
    return str(path)


def test_both_shipped_links_load_with_their_published_numbers():
    assert list_links() == ["ib-ndr", "nvlink-h200"]
    nv, ib = get_link("nvlink-h200"), get_link("ib-ndr")
    assert isinstance(nv, LinkPreset) and nv.name == "nvlink-h200"
    assert nv.bandwidth_Bps == 450e9 and nv.latency_s == 5e-6  # 900 GB/s both ways together: 450 each way
    assert ib.bandwidth_Bps == 50e9 and ib.latency_s == 1e-5  # 400 Gb/s / 8 bits
    for link in (nv, ib):
        assert link.sources and any("assumption" in s for s in link.sources)
        assert link.details["efficiency"] == 1.0


def test_transfer_time_by_hand():
    kv = 2000 * 327_680  # 2,000 tokens of h200-70b-fp8's bf16 KV: 655,360,000 bytes
    assert transfer_s(get_link("ib-ndr"), kv) == pytest.approx(10e-6 + 0.0131072, rel=1e-12)
    assert transfer_s(get_link("nvlink-h200"), kv) == pytest.approx(5e-6 + 655.36e6 / 450e9, rel=1e-12)
    assert transfer_s(get_link("ib-ndr"), 0) == 1e-5  # an empty transfer still pays the latency


def test_a_file_of_the_same_fields_loads_by_path(tmp_path):
    link = get_link(write(tmp_path, name="slow", bandwidth_Bps=1e9, latency_s=0))
    assert (link.name, link.bandwidth_Bps, link.latency_s) == ("slow", 1e9, 0.0)
    assert transfer_s(link, 3e9) == 3.0


@pytest.mark.parametrize("changes, match", [
    ({"efficiency": 0.9}, r"fields must be .*\(unknown: \['efficiency'\], missing: \[\]\)$"),
    ({"latency_s": None}, r"\(unknown: \[\], missing: \['latency_s'\]\)$"),
    ({"bandwidth_Bps": 0}, r"bandwidth_Bps must be a finite number > 0, got 0$"),
    ({"bandwidth_Bps": -5e10}, r"bandwidth_Bps must be a finite number > 0, got -50000000000\.0$"),
    ({"bandwidth_Bps": True}, r"bandwidth_Bps must be a finite number > 0, got True$"),
    ({"bandwidth_Bps": "fast"}, r"bandwidth_Bps must be a finite number > 0, got 'fast'$"),
    ({"latency_s": -1e-6}, r"latency_s must be a finite number >= 0, got -1e-06$"),
    ({"sources": "a web page"}, r"sources a list of strings"),
])
def test_bad_files_are_refused_in_one_line(tmp_path, changes, match):
    with pytest.raises(TinyserveError, match=r"^link: .*mine\.json.*" + match) as e:
        load_link(write(tmp_path, **changes))
    assert "\n" not in str(e.value)


def test_unreadable_and_non_object_files(tmp_path):
    (tmp_path / "x.json").write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(TinyserveError, match=r"^link: .*x\.json must hold a JSON object$"):
        load_link(tmp_path / "x.json")
    with pytest.raises(TinyserveError, match=r"^link: cannot read .*nope\.json"):
        load_link(tmp_path / "nope.json")


def test_an_unknown_name_lists_the_shipped_links():
    with pytest.raises(TinyserveError, match=r"^link: unknown 'pcie' \(choose ib-ndr, nvlink-h200, or a FILE\.json"):
        get_link("pcie")


def test_errors_and_texts_in_chinese(zh, tmp_path):
    with pytest.raises(TinyserveError, match=r"^link：沒有 'pcie' 這條連線（可選 ib-ndr, nvlink-h200"):
        get_link("pcie")
    with pytest.raises(TinyserveError, match=r"bandwidth_Bps 必須是 > 0 的有限數字，收到的是 0$"):
        load_link(write(tmp_path, bandwidth_Bps=0))
    nv = get_link("nvlink-h200")
    assert "每個方向 450 GB/s" in nv.text() and all("，" in s for s in nv.text("sources"))
    mine = dataclasses.replace(nv, description="my own NVLink")
    assert mine.text() == "my own NVLink"  # an edited link speaks its own words


def test_every_link_translation_is_of_the_links_current_text():
    """A link JSON edited without its catalog entry would show the old English's Chinese: fail here."""
    keys = [k for k in lang.table() if k.startswith("engine.link.") and k.count(".") >= 3]
    assert len(keys) == 8
    for key in keys:
        name, _, what = key.removeprefix("engine.link.").partition(".")
        link = get_link(name)
        own = link.sources[int(what.split(".")[1])] if what.startswith("sources.") else getattr(link, what)
        assert lang.table()[key]["en"] == own, key
