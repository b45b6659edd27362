"""One grouping of warnings by kind, for the terminal and the reports."""

from dlperf.warning_kinds import group_warnings, spread


def test_numbers_that_differ_become_their_range_or_union() -> None:
    noisy = "throughput is noisy: the standard deviation is {} of the mean (limit 10%)"
    groups = group_warnings([("a", noisy.format("10.6%")), ("b", noisy.format("58.8%")),
                             ("c", noisy.format("31.2%"))])  # fmt: skip
    assert groups == [(noisy.format("10.6–58.8%"), ["a", "b", "c"])]
    assert spread(["1, 2", "2, 3", "2"]) == "1, 2, 3"
    assert spread(["3", "3"]) == "3"
    assert spread(["5%", "2"]) == "5% / 2"  # a share and a count: not one range


def test_digits_inside_words_are_text_so_other_models_are_other_kinds() -> None:
    said = "{} has no official implementation on this device"
    groups = group_warnings([("x", said.format("resnet50")), ("y", said.format("resnet101")),
                             ("x", said.format("resnet50"))])  # fmt: skip
    assert groups == [(said.format("resnet50"), ["x"]), (said.format("resnet101"), ["y"])]
