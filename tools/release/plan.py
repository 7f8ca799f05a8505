"""The plan for a budget of hours: per collection, the frontier variant to train with.

tools/bench-release.sh --project --hours H and tools/train-all-collections.sh --hours H use it
(docs/train.md, "Quality per hour"). Inputs:

  * rows: the projection of every variant on every collection of its fixture
    (projection.Projection.project_frontier): hours per (variant, collection);
  * summary: per variant the test Kendall the frontier measured (frontier.summarise), mean
    over its seeds.

The candidates of a collection are the variants of its fixture with a Kendall measured over
at least MIN_SEEDS seeds, and the fixture's own recipe (the variant named after the fixture),
measured or not. A variant that costs more hours than the recipe is a candidate only if its
mean ranks better than the recipe's by more than the standard error of the difference of the two
means over their seeds (at least TOLERANCE): no plan spends more hours on a difference the seeds
do not separate. The plan maximises the sum over the
collections of the candidates' Kendall such that the projected hours add up to at most H; an
unmeasured recipe counts as the best measured variant of its fixture (it is the reference the
others are measured against), and wins the ties this makes. Other ties go to fewer hours, then
to the order of frontier-variants.tsv, so the same inputs always give the same plan.
"""

import itertools
import statistics


# The least test Kendall a variant must gain over its recipe to be worth more hours; above it,
# the standard error of the difference of the two means (se_of_difference).
TOLERANCE = 0.01


def se_of_difference(a, b):
    """Standard error of mean(a) - mean(b) for independent seeds: sqrt(s_a^2/n_a + s_b^2/n_b),
    with the sample variances; None when either side has fewer than two seeds."""
    if len(a) < 2 or len(b) < 2:
        return None
    return (statistics.variance(a) / len(a) + statistics.variance(b) / len(b)) ** 0.5


def bar(variant, recipe):
    """What `variant` (a summary entry) must gain over `recipe` (one, or None) to be chosen for
    more hours: the standard error of the difference, at least TOLERANCE."""
    se = (se_of_difference(variant.get("kendall", []), recipe.get("kendall", []))
          if recipe else None)
    return max(TOLERANCE, se or 0.0)


# Seeds a variant needs before a plan may choose it: the frontier's measure (3 seeds each). On
# the nlp fixture one seed moves by up to 0.05 (nlp.layers2: 0.573 / 0.626 / 0.598), so one
# lucky seed must not displace a recipe measured over three.
MIN_SEEDS = 3


class NoPlan(Exception):
    """Not even the cheapest candidates fit: .min_hours is the smallest budget that does."""

    def __init__(self, min_hours, budget):
        super().__init__("the cheapest plan takes %.2f h, more than the %.2f h given" %
                         (min_hours, budget))
        self.min_hours = min_hours


def candidates(rows, summary, order):
    """{collection: [(variant, hours, kendall or None, score, row)]} in the variants' order."""
    # A variant's figure counts (as a candidate and as the stand-in below) only over MIN_SEEDS
    # seeds; the recipe's counts whatever its seeds.
    kendall = {s["variant"]: s for s in summary
               if s["variant"] == s["fixture"] or len(s["seeds"]) >= MIN_SEEDS}
    best = {}
    for s in kendall.values():
        best[s["fixture"]] = max(best.get(s["fixture"], -1.0), s["mean"])
    out = {}
    for row in rows:
        v = row["variant"]
        fixture = row["fixture"]
        s = kendall.get(v)
        if s is None and v != fixture:
            continue  # never measured, or on too few seeds: its quality is not known
        k = s["mean"] if s else None
        score = k if k is not None else best.get(fixture, 0.0)
        out.setdefault(row["name"], []).append((v, row["hours"], k, score, row))
    for name, c in out.items():
        rec = [x for x in c if x[0] == x[4]["fixture"]]
        if rec:
            r = rec[0]
            rs = kendall.get(r[0])
            c[:] = [x for x in c if x is r or x[1] <= r[1] or
                    x[3] > r[3] + bar(kendall[x[0]], rs)]
        c.sort(key=lambda x: order.get(x[0], 1e9))
    return out


def plan(rows, summary, budget, order):
    """-> {collection: (variant, hours, kendall, row)}; raises NoPlan."""
    cands = candidates(rows, summary, order)
    names = sorted(cands)
    min_hours = sum(min(c[1] for c in cands[n]) for n in names)
    if min_hours > budget + 1e-9:
        raise NoPlan(min_hours, budget)
    best_key, best = None, None
    for combo in itertools.product(*(cands[n] for n in names)):
        hours = sum(c[1] for c in combo)
        if hours > budget + 1e-9:
            continue
        score = sum(c[3] for c in combo)
        # Higher Kendall; then more unmeasured recipes (their score is a stand-in); then fewer
        # hours; then earlier variants in the file.
        stand_ins = sum(1 for c in combo if c[2] is None and c[0] == c[4]["fixture"])
        key = (-round(score, 6), -stand_ins, round(hours, 6),
               [order.get(c[0], 1e9) for c in combo])
        if best_key is None or key < best_key:
            best_key, best = key, combo
    return {n: (c[0], c[1], c[2], c[4]) for n, c in zip(names, best)}


def fmt_hours(h):
    """Hours with two decimals, or four significant digits under a tenth (small trees)."""
    return "%.2f" % h if h >= 0.1 or h != h else "%.4g" % h


def describe(chosen, rows, summary, budget=None):
    """The plan as text lines: per collection the variant, its hours and Kendall against the
    fixture's recipe; and the variants that more seeds could bring into it (within budget)."""
    kendall = {s["variant"]: s["mean"] for s in summary}
    seeds = {s["variant"]: len(s["seeds"]) for s in summary}
    hours = {(r["variant"], r["name"]): r["hours"] for r in rows}
    # The variant column as wide as the longest name chosen, so the columns stay aligned.
    width = max([22] + [len(c[0]) for c in chosen.values()])
    lines = ["%-20s %-*s %8s %8s %5s %10s %10s  %s" % (
        "collection", width, "variant", "hours", "kendall", "seeds", "recipe_h", "recipe_k",
        "flags")]
    total = total_default = 0.0
    for name in sorted(chosen):
        v, h, k, row = chosen[name]
        fx = row["fixture"]
        dh = hours.get((fx, name), float("nan"))
        dk = kendall.get(fx)
        total += h
        total_default += dh
        lines.append("%-20s %-*s %8s %8s %5d %10s %10s  %s" % (
            name, width, v, fmt_hours(h), "%.3f" % k if k is not None else "-", seeds.get(v, 0),
            fmt_hours(dh),
            "%.3f" % dk if dk is not None else "-", row["flags"] or "(the recipe)"))
    lines.append("total: %s h projected (the recipes: %s h)" % (fmt_hours(total),
                                                               fmt_hours(total_default)))
    # What the plan costs in Kendall: per fixture, the chosen variant's figure against the
    # recipe's, where both were measured.
    costs = []
    for name in sorted(chosen):
        v, _, k, row = chosen[name]
        dk = kendall.get(row["fixture"])
        if k is not None and dk is not None:
            costs.append("%s %+.3f" % (name, k - dk))
        elif v != row["fixture"]:
            costs.append("%s unknown (the recipe is not measured)" % name)
    lines.append("test Kendall against the recipes (frontier fixtures): %s" %
                 (", ".join(costs) if costs else "no change"))
    waiting = waiting_for_seeds(chosen, rows, summary, budget)
    if waiting:
        lines.append("not chosen for fewer than %d seeds: %s" % (MIN_SEEDS, ", ".join(waiting)))
    return lines


def waiting_for_seeds(chosen, rows, summary, budget=None):
    """The variants of the plan's fixtures measured on too few seeds to be chosen that would
    change the plan if their seeds held: cheaper than the plan's variants on their collections,
    or better than them by more than TOLERANCE, and within the budget (hours) in place of
    them. Each with its seeds, mean Kendall and projected
    hours against the plan's: what more seeds could buy."""
    fixture_of = {name: row["fixture"] for name, (_, _, _, row) in chosen.items()}
    out = []
    for s in summary:
        v, fx = s["variant"], s["fixture"]
        if v == fx or not s["seeds"] or len(s["seeds"]) >= MIN_SEEDS:
            continue
        names = [n for n in sorted(chosen) if fixture_of[n] == fx]
        hours = [r["hours"] for r in rows if r["variant"] == v and r["name"] in names]
        if not names or len(hours) != len(names):
            continue  # not projected on these collections
        plan_hours = sum(chosen[c][1] for c in names)
        plan_k = [chosen[c][2] for c in names if chosen[c][2] is not None]
        cheaper = sum(hours) < plan_hours - 1e-9
        better = bool(plan_k) and s["mean"] > min(plan_k) + TOLERANCE
        total = sum(c[1] for c in chosen.values())
        fits = budget is None or total - plan_hours + sum(hours) <= budget + 1e-9
        if not fits or (not cheaper and not better):
            continue
        n = len(s["seeds"])
        out.append("%s (%d seed%s, %.3f; %s h where the plan takes %s h)" % (
            v, n, "" if n == 1 else "s", s["mean"], fmt_hours(sum(hours)), fmt_hours(plan_hours)))
    return out


def as_json(chosen):
    return {n: dict(variant=v, hours=h, kendall=k, recipe=row["recipe"], flags=row["flags"])
            for n, (v, h, k, row) in sorted(chosen.items())}
