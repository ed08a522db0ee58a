"""The H200 document's report stays small (at most 600 KB) and still carries every byte of its results.

Its results hold every op each profiled run listed, with CUDA kernel names of up to 1,300 characters: 1.1 MB of
compact JSON. The page embeds them gzip+base64 past EMBED_PLAIN_MAX, shows each op table's top rows and each
kernel's short name, and keeps the rest in collapsed details.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from fp16doctor.errors import DoctorError
from fp16doctor.report import write_report
from fp16doctor.report.viewmodel import EMBED_PLAIN_MAX, embed_json
from fp16doctor.results import load_all

H200 = Path(__file__).resolve().parents[3] / "docs" / "examples" / "gpu-h200-keras-torch-full" / "results.json"
MAX_BYTES = 600_000


@pytest.fixture(scope="module")
def h200_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    page = tmp_path_factory.mktemp("h200") / "report.html"
    write_report([json.loads(H200.read_text(encoding="utf-8"))], page, "html")
    return page


def test_the_h200_report_is_at_most_600_kb(h200_page: Path) -> None:
    assert h200_page.stat().st_size <= MAX_BYTES, h200_page.stat().st_size
    assert H200.stat().st_size > MAX_BYTES, "the results themselves are larger: the check means something"


def test_the_h200_report_still_reads_back_as_its_results(h200_page: Path) -> None:
    page = h200_page.read_text(encoding="utf-8")
    assert 'data-encoding="gzip+base64"' in page and page.count('id="fp16doctor-results"') == 1
    assert load_all(h200_page) == load_all(H200)


def test_small_results_stay_plain_json() -> None:
    doc = {"schema_version": 1, "runs": [], "note": "</script><!--"}
    embedded = embed_json([doc])
    assert embedded.encoding == "" and json.loads(str(embedded.text)) == [doc]
    assert "</script>" not in embedded.text and EMBED_PLAIN_MAX > len(str(embedded.text))


def test_the_whole_kernel_names_stay_in_a_collapsed_detail(h200_page: Path) -> None:
    page = h200_page.read_text(encoding="utf-8")
    whole = re.findall(r'<details class="[^"]*whole-name"><summary>.*?</summary><code>([^<]{300,})</code>', page)
    assert whole, "long names are shown short, whole in a detail"
    shown = re.findall(r'<td class="impl"><details class="whole-name"><summary><code>([^<]*)</code>', page)
    assert shown and max(len(s) for s in shown) <= 80


def test_a_damaged_embedded_blob_says_so(h200_page: Path, tmp_path: Path) -> None:
    page = h200_page.read_text(encoding="utf-8")
    broken = tmp_path / "broken.html"
    broken.write_text(re.sub(r'(data-encoding="gzip\+base64">)H4sI', r"\1!!!!", page, count=1), encoding="utf-8")
    with pytest.raises(DoctorError, match="damaged"):
        load_all(broken)
