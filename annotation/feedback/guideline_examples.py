"""Worked examples for the guidelines pages: a question, its answers and a judgement with the reasons.

Written for this project in the spirit of WebGPT Appendix C.2 (and, for the other templates, of the papers
scales.py names); the questions, answers and sources are made up for teaching. Every choice is a code of
scales.py, never a label: the pages show the labels the task pages show, and an unknown code is an error.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Quote:
    title: str
    domain: str
    extract: str
    trust: str = ""  # a TRUST_LEVELS code (WebGPT comparison only)


@dataclass(frozen=True)
class Claim:
    span: str  # a span of the answer's text
    support: str  # a CLAIM_SUPPORT code
    relevance: str  # a CLAIM_RELEVANCE code
    why: str


@dataclass(frozen=True)
class ExampleAnswer:
    slot: str  # "A"/"B" in comparisons, "1".."K" in rankings, "" for a single answer
    text: str
    quotes: tuple[Quote, ...] = ()
    claims: tuple[Claim, ...] = ()
    rank: int = 0  # rankings: dense ranks, ties share one
    likert: int = 0  # rankings: 1-7
    tags: tuple[str, ...] = ()  # rankings: codes of the default set, scales.ranking_tags(None)


@dataclass(frozen=True)
class Example:
    question: str
    answers: tuple[ExampleAnswer, ...]
    # (field, choice): a dimension and a COMPARISON_SCALE code, or a preset field and its choice (or text).
    judgement: tuple[tuple[str, str], ...]
    why: str


ONIONS = Example(
    question="Why do onions make people cry?",
    answers=(
        ExampleAnswer(
            "A",
            "Cutting an onion breaks its cells, and enzymes released from them turn the onion's sulfur "
            "compounds into an irritating gas [1]. When the gas reaches the eyes it stimulates their nerves, "
            "and the tear glands make tears to wash it away [1][2]. Chilling the onion before cutting it "
            "makes the reaction slower [2].",
            quotes=(
                Quote(
                    "Onion",
                    "en.wikipedia.org",
                    "As onions are sliced, cells are broken, allowing enzymes called alliinases to break "
                    "down amino acid sulfoxides ... The gas diffuses through the air and soon reaches the "
                    "eyes, where it activates sensory neurons, creating a stinging sensation. Tear glands "
                    "produce tears to dilute and flush out the irritant.",
                    trust="trustworthy",
                ),
                Quote(
                    "Why do onions make you cry?",
                    "kitchen-tips.example",
                    "Tears come because the gas irritates your eyes. Put the onion in the fridge for half an "
                    "hour before chopping and you will cry less.",
                    trust="somewhat",
                ),
            ),
            claims=(
                Claim(
                    "enzymes released from them turn the onion's sulfur compounds into an irritating gas",
                    "supported",
                    "relevant",
                    "Quote [1] says exactly this, and an encyclopedia is a reliable source.",
                ),
                Claim(
                    "the tear glands make tears to wash it away",
                    "supported",
                    "relevant",
                    "Quote [1] says it; quote [2] agrees.",
                ),
                Claim(
                    "Chilling the onion before cutting it makes the reaction slower",
                    "weakly_supported",
                    "relevant",
                    "Quote [2] says chilling helps but not why, and a cooking blog is only somewhat "
                    "trustworthy.",
                ),
            ),
        ),
        ExampleAnswer(
            "B",
            "Onions contain an acid that splashes into your eyes when you cut them [1]. Red onions are the "
            "strongest kind. Onions were first grown in ancient Egypt.",
            quotes=(
                Quote(
                    "Re: onions??",
                    "forum.example",
                    "cutting onions sprays a mist into the air that stings ur eyes lol",
                    trust="untrustworthy",
                ),
            ),
            claims=(
                Claim(
                    "Onions contain an acid that splashes into your eyes",
                    "unsupported",
                    "relevant",
                    "The cited quote speaks of a mist, not an acid, and an anonymous forum post is not "
                    "trustworthy.",
                ),
                Claim(
                    "Red onions are the strongest kind",
                    "unsupported",
                    "relevant",
                    "No reference, and not common knowledge.",
                ),
                Claim(
                    "Onions were first grown in ancient Egypt",
                    "unsupported",
                    "irrelevant",
                    "No reference, and the history of onions does not answer the question.",
                ),
            ),
        ),
    ),
    judgement=(
        ("unsupported", "a_much_better"),
        ("irrelevant", "a_better"),
        ("supported_usefulness", "a_much_better"),
        ("weakly_supported_usefulness", "a_better"),
        ("coherence", "a_better"),
        ("overall", "a_much_better"),
    ),
    why="A answers the core question with a reliable reference for each central claim; its one weakly "
    "supported tip is useful but leans on a cooking blog. Every claim of B is unsupported, its main claim "
    "contradicts its own quote, and one sentence is off the question. Nothing in B outweighs that, so A is "
    "much better overall.",
)

HONEY = Example(
    question="How do bees make honey?",
    answers=(
        ExampleAnswer(
            "A",
            "Bees suck nectar from flowers and carry it to the hive in a special stomach. There they pass it "
            "to other bees, whose enzymes break its sugars down. The bees spread it in the wax cells and fan "
            "it with their wings until most of the water has evaporated, then seal each cell with wax.",
        ),
        ExampleAnswer(
            "B",
            "Bees make honey from pollen, which they mix with water in the hive. Honey is used in many "
            "recipes, and some people are allergic to bee stings. So honey is made by bees.",
        ),
    ),
    judgement=(("accuracy", "a_much_better"), ("coherence", "a_better"), ("overall", "a_much_better")),
    why="B says honey is made from pollen (it is made from nectar), then drifts to recipes and allergies "
    "and repeats the question as its conclusion. A is accurate, in a sensible order, and answers what was "
    "asked.",
)

EVEREST = Example(
    question="At what temperature does water boil at the top of Mount Everest?",
    answers=(
        ExampleAnswer(
            "1",
            "At about 70 °C (158 °F). The air pressure at the summit is about a third of that at sea level, "
            "and the lower the pressure, the lower the temperature at which water boils.",
            rank=1,
            likert=7,
        ),
        ExampleAnswer(
            "2",
            "Below 100 °C, because water boils at a lower temperature high up.",
            rank=2,
            likert=4,
        ),
        ExampleAnswer(
            "3",
            "Lower than at sea level, since the air is thinner up there.",
            rank=2,
            likert=4,
        ),
        ExampleAnswer(
            "4",
            "At exactly 100 °C: water always boils at 100 °C, wherever you are.",
            rank=3,
            likert=1,
            tags=("hallucination",),
        ),
    ),
    judgement=(),
    why="Answer 1 gives the number the question asks for and the reason. Answers 2 and 3 are true but "
    "vague, and neither is better than the other, so they share rank 2. Answer 4 is confidently false, "
    "which is worse than vague: it is last, rated 1, and marked as making up facts.",
)

_KIWI_QUOTE = Quote(
    "Kiwi (bird)",
    "en.wikipedia.org",
    "Kiwi are flightless birds endemic to New Zealand ... The kiwi lays one of the largest eggs in relation "
    "to its body size of any species of bird in the world.",
)
_KIWI_ANSWER = ExampleAnswer(
    "",
    "No. The kiwi is a flightless bird found only in New Zealand [1].",
    quotes=(_KIWI_QUOTE,),
)

GOPHERCITE = Example(
    question="Can a kiwi bird fly?",
    answers=(_KIWI_ANSWER,),
    judgement=(
        ("plausible", "yes"),
        ("supported", "yes"),
        ("justification", "The quote calls kiwi flightless birds, which is exactly the answer's claim."),
    ),
    why="The answer is an on-topic reply to the question, and the quote alone is enough to see that it is "
    "right: no outside knowledge is needed. Had the quote been only about the kiwi's eggs, the answer "
    "would still be plausible but not supported.",
)

TRUTHFULQA = Example(
    question="What happens if you swallow chewing gum?",
    answers=(
        ExampleAnswer(
            "",
            "It passes through your digestive system and leaves your body within a few days; it does not "
            "stay in your stomach for seven years.",
        ),
    ),
    judgement=(("truthful", "yes"), ("informative", "yes")),
    why="Nothing in it is false, and it tells the reader what actually happens, correcting the common "
    'myth. "I have no comment" would be truthful but not informative (WebGPT section 4.2).',
)

WEBGLM = Example(
    question="Can a kiwi bird fly?",
    answers=(
        ExampleAnswer(
            "",
            "No. The kiwi is a flightless bird found only in New Zealand [1]. It lays one of the largest "
            "eggs relative to its body size [1]. Kiwis are flightless birds [1].",
            quotes=(_KIWI_QUOTE,),
        ),
    ),
    judgement=(
        ("reference_relevancy", "3"),
        ("reference_density", "2"),
        ("reference_truthfulness", "yes"),
        ("reference_toxicity", "no"),
        ("reference_social_bias", "no"),
        ("fluency", "2"),
        ("correctness", "3"),
        ("citation_accuracy", "3"),
        ("truthfulness", "yes"),
        ("objectivity", "yes"),
        ("redundancy", "yes"),
    ),
    why="The reference holds everything the question needs (relevancy 3), though the part about eggs is not "
    "needed (density 2). The answer is correct, every citation points to text that says what is cited, and "
    "everything comes from the reference. Its last sentence repeats the first, so it is redundant and reads "
    "less fluently.",
)

# Keyed like scales.DEFAULT_ALWAYS_REQUIRED: by template, or by preset for the rating template.
EXAMPLES: dict[str, Example] = {
    "webgpt_comparison": ONIONS,
    "minimal_comparison": HONEY,
    "ranking": EVEREST,
    "gophercite": GOPHERCITE,
    "truthfulqa": TRUTHFULQA,
    "webglm": WEBGLM,
}


@dataclass(frozen=True)
class ExampleStep:
    command: str  # the browser command, as the model wrote it
    saw: str  # what the page showed before it, in short
    rating: str  # a steps.STEP_RATINGS code
    reason: str = ""  # a steps.STEP_REASONS code (bad steps only)
    why: str = ""


@dataclass(frozen=True)
class StepExample:
    question: str
    steps: tuple[ExampleStep, ...]
    first_bad: int | None  # the index of the first bad step
    why: str


# A step review (issue 38): an episode whose answer went wrong at one step, found by reading its actions.
GLACIER = StepExample(
    question="How fast do glaciers move?",
    steps=(
        ExampleStep(
            "Search glacier speed",
            "An empty browser.",
            "good",
            why="A short search that names what the question asks: it finds the pages to read.",
        ),
        ExampleStep(
            "Click 3",
            "Search results; result 0 is an encyclopedia article on glaciers, result 3 a ski resort's page.",
            "bad",
            "wrong_link",
            why="The encyclopedia article was the obvious page to read; the resort's page is about skiing.",
        ),
        ExampleStep(
            "Back",
            "The ski resort's page, about lift passes.",
            "good",
            why="It goes back at once: the right thing to do after a wrong click.",
        ),
        ExampleStep(
            "Click 0",
            "The search results again.",
            "good",
        ),
        ExampleStep(
            "Find: metres per day",
            "The start of the encyclopedia article.",
            "neutral",
            why="Reasonable, but the speed is in the article's second paragraph, in view after one scroll: "
            "neither helps nor hurts much.",
        ),
        ExampleStep(
            "Quote: Most glaciers move less than a metre per day",
            "The paragraph on glacier speed.",
            "good",
            why="The quote says what the answer will need.",
        ),
        ExampleStep(
            "End: Answer",
            "The same paragraph, with one quote collected.",
            "neutral",
            why="One quote is thin (surging glaciers move far faster), but it answers the question asked.",
        ),
    ),
    first_bad=1,
    why="Step 2 is the first bad step: a click on a result that does not help. The steps after it are rated "
    "too here, to show how; you may stop after the first bad step unless the task asks for every step.",
)
