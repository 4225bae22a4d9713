"""The functions a sample project is made of: small, correct, self-contained Python functions on
strings, lists and numbers, each with a few named test inputs.

A `Template` is source text with `{name}` (one of `names`) and optional `{constant}` slots (one of
each `constants` choice), so seeds give different names, constants and mixes. Functions use no
`while` loops and no recursion, so a mutated copy always terminates. Expected values are never
written here: the generator computes them by running the correct function.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Template:
    names: tuple[str, ...]
    source: str
    cases: tuple[tuple[str, tuple[Any, ...]], ...]  # (label, positional arguments)
    constants: dict[str, tuple[str, ...]] = field(default_factory=dict)


TEXT: tuple[Template, ...] = (
    Template(
        ("count_vowels", "vowel_count"),
        '''def {name}(text):
    """Count the vowels in `text`, ignoring case."""
    count = 0
    for ch in text.lower():
        if ch in "{vowels}":
            count += 1
    return count
''',
        (("empty", ("",)), ("word", ("Banana",)), ("sentence", ("Hello World",)), ("none", ("rhythm",))),
        {"vowels": ("aeiou", "aeiouy")},
    ),
    Template(
        ("truncate", "shorten", "clip_text"),
        '''def {name}(text, width):
    """Cut `text` to at most `width` characters, ending with "{mark}" when it is cut."""
    if len(text) <= width:
        return text
    return text[: width - len("{mark}")] + "{mark}"
''',
        (("short", ("hi", 5)), ("exact", ("hello", 5)), ("long", ("hello world", 8))),
        {"mark": ("...", "~", "..")},
    ),
    Template(
        ("capitalize_words", "title_words"),
        '''def {name}(text):
    """Upper-case the first letter of every word."""
    words = [word[:1].upper() + word[1:] for word in text.split()]
    return " ".join(words)
''',
        (
            ("two", ("hello world",)),
            ("one", ("python",)),
            ("spaces", ("  many   spaces ",)),
            ("empty", ("",)),
        ),
    ),
    Template(
        ("is_palindrome", "reads_backwards"),
        '''def {name}(text):
    """True when `text` reads the same backwards, ignoring case and punctuation."""
    letters = [ch.lower() for ch in text if ch.isalnum()]
    return letters == letters[::-1]
''',
        (("word", ("Racecar",)), ("phrase", ("Never odd, or even",)), ("no", ("python",)), ("pair", ("ab",))),
    ),
    Template(
        ("initials", "name_initials"),
        '''def {name}(full_name):
    """The upper-case initials of a name: "ada lovelace" gives "AL"."""
    return "{sep}".join(part[0].upper() for part in full_name.split())
''',
        (("two", ("ada lovelace",)), ("three", ("grace brewster hopper",)), ("one", ("linus",))),
        {"sep": ("", ".")},
    ),
    Template(
        ("longest_word", "widest_word"),
        '''def {name}(text):
    """The longest word of `text`; the first one wins a tie."""
    best = ""
    for word in text.split():
        if len(word) > len(best):
            best = word
    return best
''',
        (("simple", ("a quick fox",)), ("tie", ("cat dog",)), ("empty", ("",)), ("last", ("to be sure",))),
    ),
    Template(
        ("common_prefix", "shared_prefix"),
        '''def {name}(first, second):
    """The longest common prefix of two strings."""
    size = min(len(first), len(second))
    for i in range(size):
        if first[i] != second[i]:
            return first[:i]
    return first[:size]
''',
        (
            ("partial", ("interview", "internet")),
            ("none", ("abc", "xyz")),
            ("contained", ("prefix", "pre")),
            ("same", ("same", "same")),
        ),
    ),
    Template(
        ("count_word", "word_frequency"),
        '''def {name}(text, word):
    """How often `word` occurs in `text` as a whole word, ignoring case."""
    target = word.lower()
    return sum(1 for w in text.lower().split() if w == target)
''',
        (
            ("twice", ("The cat saw the dog", "the")),
            ("absent", ("a b c", "d")),
            ("any_case", ("Go go", "GO")),
        ),
    ),
    Template(
        ("pad_left", "right_align"),
        '''def {name}(text, width):
    """Right-align `text` in `width` characters by padding on the left with "{fill}"."""
    missing = width - len(text)
    if missing <= 0:
        return text
    return "{fill}" * missing + text
''',
        (("pad", ("7", 3)), ("exact", ("abc", 3)), ("long", ("abcd", 2)), ("one", ("ab", 3))),
        {"fill": (".", "*", "0")},
    ),
    Template(
        ("is_word", "looks_like_word"),
        '''def {name}(text):
    """True when `text` is not empty and has letters only."""
    return len(text) > 0 and text.isalpha()
''',
        (("word", ("hello",)), ("digits", ("abc1",)), ("empty", ("",)), ("one", ("x",))),
    ),
    Template(
        ("reverse_words", "backwards_words"),
        '''def {name}(text):
    """The words of `text` in reverse order."""
    words = text.split()
    return " ".join(words[::-1])
''',
        (("three", ("one two three",)), ("one", ("solo",)), ("four", ("a b c d",))),
    ),
)

LISTS: tuple[Template, ...] = (
    Template(
        ("chunk", "batched", "split_every"),
        '''def {name}(items, size):
    """Split `items` into lists of `size` items (the last one may be shorter)."""
    return [items[i : i + size] for i in range(0, len(items), size)]
''',
        (
            ("even", ([1, 2, 3, 4], 2)),
            ("uneven", ([1, 2, 3, 4, 5], 2)),
            ("big", ([1, 2], 5)),
            ("empty", ([], 3)),
        ),
    ),
    Template(
        ("running_total", "cumulative_sum"),
        '''def {name}(numbers):
    """Cumulative sums: [1, 2, 3] gives [1, 3, 6]."""
    totals = []
    total = 0
    for n in numbers:
        total += n
        totals.append(total)
    return totals
''',
        (("three", ([1, 2, 3],)), ("mixed", ([5, -2, 4],)), ("empty", ([],))),
    ),
    Template(
        ("dedupe", "unique_items", "drop_repeats"),
        '''def {name}(items):
    """`items` without repeats, keeping the first occurrence of each."""
    seen = []
    result = []
    for item in items:
        if item not in seen:
            seen.append(item)
            result.append(item)
    return result
''',
        (("repeats", ([3, 1, 3, 2, 1],)), ("none", ([1, 2],)), ("words", (["a", "b", "a"],))),
    ),
    Template(
        ("second_largest", "runner_up"),
        '''def {name}(numbers):
    """The second largest distinct value, or None when there is none."""
    ordered = sorted(set(numbers))
    if len(ordered) < 2:
        return None
    return ordered[-2]
''',
        (("plain", ([3, 1, 4, 1, 5],)), ("same", ([7, 7, 7],)), ("two", ([2, 9],)), ("empty", ([],))),
    ),
    Template(
        ("rotate", "rotate_right"),
        '''def {name}(items, steps):
    """Rotate `items` right by `steps` places."""
    if not items:
        return []
    steps = steps % len(items)
    return items[-steps:] + items[:-steps]
''',
        (("one", ([1, 2, 3], 1)), ("wrap", ([1, 2, 3, 4], 6)), ("empty", ([], 2)), ("zero", ([1, 2], 0))),
    ),
    Template(
        ("pairwise_diffs", "gaps"),
        '''def {name}(numbers):
    """Differences between neighbours: [1, 4, 9] gives [3, 5]."""
    return [b - a for a, b in zip(numbers, numbers[1:])]
''',
        (("squares", ([1, 4, 9, 16],)), ("single", ([5],)), ("down", ([10, 7, 7],))),
    ),
    Template(
        ("first_or", "head_or_default"),
        '''def {name}(items, default):
    """The first item of `items`, or `default` when it is empty."""
    if items:
        return items[0]
    return default
''',
        (("many", ([4, 5, 6], 0)), ("empty", ([], -1)), ("one", (["x"], "?"))),
    ),
    Template(
        ("count_equal", "occurrences"),
        '''def {name}(items, target):
    """How many items equal `target`."""
    return sum(1 for item in items if item == target)
''',
        (("some", ([1, 2, 1, 1], 1)), ("none", ([1, 2], 3)), ("strings", (["a", "b", "a"], "a"))),
    ),
    Template(
        ("window_max", "sliding_max"),
        '''def {name}(numbers, size):
    """The largest value of every run of `size` neighbours."""
    return [max(numbers[i : i + size]) for i in range(len(numbers) - size + 1)]
''',
        (("pairs", ([1, 3, 2, 5], 2)), ("triples", ([4, 1, 2, 7, 3], 3)), ("whole", ([2, 8], 2))),
    ),
    Template(
        ("leading_positives", "take_positive"),
        '''def {name}(numbers):
    """The leading run of numbers above {floor}."""
    result = []
    for n in numbers:
        if n <= {floor}:
            break
        result.append(n)
    return result
''',
        (("stop", ([3, 2, 0, 5],)), ("all", ([1, 2],)), ("none", ([-1, 4],)), ("edge", ([2, 1, 1, 4],))),
        {"floor": ("0", "1")},
    ),
    Template(
        ("last_n", "tail"),
        '''def {name}(items, count):
    """The last `count` items (all of them when there are fewer)."""
    if count <= 0:
        return []
    return items[-count:]
''',
        (("two", ([1, 2, 3, 4], 2)), ("more", ([1, 2], 5)), ("zero", ([1, 2], 0)), ("one", ([7, 8], 1))),
    ),
    Template(
        ("interleave", "zip_merge"),
        '''def {name}(first, second):
    """Alternate the items of two lists; the leftovers of the longer one go last."""
    result = []
    for a, b in zip(first, second):
        result.append(a)
        result.append(b)
    shorter = min(len(first), len(second))
    return result + first[shorter:] + second[shorter:]
''',
        (("same", ([1, 2], ["a", "b"])), ("longer", ([1, 2, 3], ["a"])), ("empty", ([], [9, 8]))),
    ),
    Template(
        ("outliers", "outside_range"),
        '''def {name}(items, low, high):
    """The items outside the range [low, high], in order."""
    return [x for x in items if x < low or x > high]
''',
        (("both", ([1, 5, 9, 12], 3, 10)), ("edges", ([3, 10, 11], 3, 10)), ("inside", ([4, 6], 3, 10))),
    ),
)

NUMBERS: tuple[Template, ...] = (
    Template(
        ("clamp", "limit"),
        '''def {name}(value, low, high):
    """`value` limited to the range [low, high]."""
    if value < low:
        return low
    if value > high:
        return high
    return value
''',
        (("below", (-5, 0, 10)), ("inside", (4, 0, 10)), ("above", (12, 0, 10)), ("edge", (10, 0, 10))),
    ),
    Template(
        ("bound", "fit_between"),
        '''def {name}(value, low, high):
    """`value` moved into [low, high] when it is outside."""
    return max(low, min(value, high))
''',
        (("below", (-3, 1, 9)), ("inside", (5, 1, 9)), ("above", (20, 1, 9))),
    ),
    Template(
        ("is_multiple", "divides_evenly"),
        '''def {name}(number):
    """True when `number` is a multiple of {divisor}."""
    return number % {divisor} == 0
''',
        (("yes", (12,)), ("no", (7,)), ("zero", (0,)), ("odd", (9,))),
        {"divisor": ("2", "3")},
    ),
    Template(
        ("digit_sum", "sum_of_digits"),
        '''def {name}(number):
    """The sum of the decimal digits of `number`, sign ignored."""
    total = 0
    for digit in str(abs(number)):
        total += int(digit)
    return total
''',
        (("plain", (1234,)), ("negative", (-95,)), ("zero", (0,))),
    ),
    Template(
        ("mean", "average"),
        '''def {name}(numbers):
    """The arithmetic mean, or 0.0 when there are no numbers."""
    if not numbers:
        return 0.0
    return sum(numbers) / len(numbers)
''',
        (("ints", ([1, 2, 3, 4],)), ("empty", ([],)), ("one", ([7],))),
    ),
    Template(
        ("factorial", "product_up_to"),
        '''def {name}(n):
    """n! for n >= 0."""
    result = 1
    for i in range(2, n + 1):
        result *= i
    return result
''',
        (("zero", (0,)), ("five", (5,)), ("three", (3,))),
    ),
    Template(
        ("percent", "percentage"),
        '''def {name}(part, whole):
    """`part` as a percentage of `whole`, rounded to {digits} decimals; 0.0 when `whole` is 0."""
    if whole == 0:
        return 0.0
    return round(100 * part / whole, {digits})
''',
        (("third", (1, 3)), ("half", (5, 10)), ("none", (3, 0)), ("more", (3, 2))),
        {"digits": ("1", "2")},
    ),
    Template(
        ("in_range", "within"),
        '''def {name}(value, low, high):
    """True when low <= value < high."""
    return low <= value and value < high
''',
        (("inside", (3, 1, 5)), ("low_edge", (1, 1, 5)), ("high_edge", (5, 1, 5)), ("below", (0, 1, 5))),
    ),
    Template(
        ("sign", "signum"),
        '''def {name}(number):
    """-1, 0 or 1 according to the sign of `number`."""
    if number > 0:
        return 1
    if number < 0:
        return -1
    return 0
''',
        (("positive", (8,)), ("negative", (-2,)), ("zero", (0,))),
    ),
    Template(
        ("triangle", "sum_to"),
        '''def {name}(n):
    """The sum 1 + 2 + ... + n."""
    return n * (n + 1) // 2
''',
        (("four", (4,)), ("one", (1,)), ("ten", (10,))),
    ),
    Template(
        ("median", "middle_value"),
        '''def {name}(numbers):
    """The median of a non-empty list of numbers."""
    ordered = sorted(numbers)
    middle = len(ordered) // 2
    if len(ordered) % 2 == 1:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / 2
''',
        (("odd", ([5, 1, 3],)), ("even", ([4, 1, 3, 2],)), ("one", ([9],))),
    ),
    Template(
        ("count_above", "how_many_over"),
        '''def {name}(numbers):
    """How many numbers are strictly above {threshold}."""
    return len([n for n in numbers if n > {threshold}])
''',
        (("some", ([1, 5, 10, 3],)), ("edge", ([4, 4, 5],)), ("none", ([],))),
        {"threshold": ("3", "4")},
    ),
    Template(
        ("all_positive", "none_negative"),
        '''def {name}(numbers):
    """True when every number is above zero (also when there are none)."""
    for n in numbers:
        if n <= 0:
            return False
    return True
''',
        (("yes", ([1, 2, 3],)), ("no", ([4, -1],)), ("zero", ([0],)), ("empty", ([],))),
    ),
)

THEMES: dict[str, tuple[tuple[str, ...], tuple[Template, ...]]] = {
    # theme: (module name choices, templates)
    "text": (("text", "strings", "words"), TEXT),
    "lists": (("listops", "sequences", "items"), LISTS),
    "numbers": (("numbers", "mathutil", "arith"), NUMBERS),
}
