"""pad_token_ids: widths rounded up to a multiple (never past the model's max length), left and
right padding, bad multiples."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from anglekit.model.padding import pad_token_ids

ROWS = [[5, 6, 7], [8] * 10, [9]]


@pytest.mark.parametrize("left", [False, True])
@pytest.mark.parametrize(("multiple", "cap", "width"), [(1, None, 10), (8, None, 16), (8, 12, 12), (8, 9, 10), (5, None, 10), (16, 512, 16)])
def test_widths_round_up_to_the_multiple_within_the_cap(left: bool, multiple: int, cap: int | None, width: int) -> None:
    out = pad_token_ids(ROWS, 0, left=left, multiple=multiple, cap=cap)
    ids, mask = out["input_ids"].numpy(), out["attention_mask"].numpy()
    assert ids.shape == mask.shape == (3, width)
    for row, seq in enumerate(ROWS):
        kept = ids[row][mask[row] == 1].tolist()
        assert kept == seq and mask[row].sum() == len(seq)
        span = mask[row, width - len(seq) :] if left else mask[row, : len(seq)]
        assert span.all() and (ids[row][mask[row] == 0] == 0).all()


@pytest.mark.parametrize("bad", [0, -8, 2.5, "8", True, None])
def test_a_bad_multiple_is_a_clear_error(bad: Any) -> None:
    with pytest.raises(ValueError, match="multiple must be a positive int"):
        pad_token_ids(ROWS, 0, multiple=bad)


def test_an_empty_batch_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="empty batch"):
        pad_token_ids([], 0, multiple=8)


def test_the_default_pads_to_the_longest_row_exactly() -> None:
    out = pad_token_ids([[1, 2], [3]], 0)
    np.testing.assert_array_equal(out["attention_mask"].numpy(), [[1, 1], [1, 0]])
