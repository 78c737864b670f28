"""Word lists for the CheckList evaluator, written for this project.

Names and places leave out words that are also common English words (Will, Mark, Rose, Nice, Turkey, Jordan,
...), so a lower-cased text's ordinary words are never mistaken for a name or a place. Template words are
short, unambiguous and sentiment-clear; the nouns are neutral things a review or a report may be about.
"""

from __future__ import annotations

MALE_NAMES = (
    "John", "James", "Michael", "David", "Robert", "Thomas", "Daniel", "Matthew", "Andrew", "Steven",
    "Kevin", "Brian", "Jason", "Jeffrey", "Ryan", "Eric", "Peter", "Paul", "Richard", "Charles",
    "Joseph", "Anthony", "Christopher", "Timothy", "George", "Edward", "Samuel", "Benjamin",
)
FEMALE_NAMES = (
    "Mary", "Sarah", "Emily", "Jennifer", "Jessica", "Laura", "Emma", "Olivia", "Rachel", "Rebecca",
    "Hannah", "Julia", "Anna", "Michelle", "Linda", "Susan", "Karen", "Nancy", "Elizabeth", "Catherine",
    "Margaret", "Patricia", "Barbara", "Helen", "Sophia", "Natalie", "Alice", "Lucy",
)

CITIES = (
    "London", "Berlin", "Madrid", "Rome", "Vienna", "Prague", "Dublin", "Lisbon", "Amsterdam", "Stockholm",
    "Oslo", "Helsinki", "Warsaw", "Budapest", "Athens", "Moscow", "Tokyo", "Beijing", "Shanghai", "Seoul",
    "Mumbai", "Delhi", "Bangkok", "Sydney", "Melbourne", "Toronto", "Chicago", "Boston", "Seattle",
    "New York", "Los Angeles", "San Francisco", "Cairo", "Nairobi", "Lagos", "Mexico City",
)
COUNTRIES = (
    "France", "Germany", "Spain", "Italy", "Austria", "Ireland", "Portugal", "Sweden", "Norway", "Finland",
    "Poland", "Hungary", "Greece", "Russia", "Japan", "Korea", "India", "Thailand", "Australia", "Canada",
    "Mexico", "Brazil", "Argentina", "Egypt", "Kenya", "Nigeria", "Iran", "Pakistan", "Vietnam",
    "Indonesia", "England", "Scotland", "United States", "New Zealand", "South Africa",
)

# Phrases appended by the DIR tests: each is clearly one-sided on its own.
POSITIVE_PHRASES = (
    "I loved it.", "Highly recommended.", "It was wonderful.", "Absolutely brilliant.",
    "I enjoyed every minute.", "A real delight.", "It exceeded my expectations.", "Truly excellent.",
)
NEGATIVE_PHRASES = (
    "I hated it.", "Not recommended.", "It was awful.", "Absolutely dreadful.",
    "I regretted every minute.", "A real disappointment.", "It was a waste of time.", "Truly terrible.",
)

POSITIVE_ADJECTIVES = (
    "good", "great", "excellent", "wonderful", "amazing", "enjoyable", "delightful", "brilliant",
    "fantastic", "superb",
)
NEGATIVE_ADJECTIVES = (
    "bad", "terrible", "awful", "horrible", "boring", "dreadful", "disappointing", "poor", "dull",
    "unpleasant",
)
INTENSIFIERS = ("really", "very", "extremely", "incredibly")

# Neutral things a template sentence is about.
NEUTRAL_NOUNS = ("movie", "film", "book", "product", "service", "show", "story", "meal")

# Contraction -> expansion (lower case), used in both directions: contractions are expanded and expansions
# contracted. Forms that are ambiguous either way are left out ("'d" = had/would, "he's" = is/has,
# "I have" -> "I've" where "have" is the main verb).
CONTRACTIONS = {
    "isn't": "is not", "aren't": "are not", "wasn't": "was not", "weren't": "were not",
    "don't": "do not", "doesn't": "does not", "didn't": "did not", "haven't": "have not",
    "hasn't": "has not", "hadn't": "had not", "won't": "will not", "wouldn't": "would not",
    "can't": "cannot", "couldn't": "could not", "shouldn't": "should not", "mustn't": "must not",
    "it's": "it is", "that's": "that is", "there's": "there is", "what's": "what is",
    "i'm": "i am", "you're": "you are", "we're": "we are", "they're": "they are",
    "i'll": "i will", "you'll": "you will", "we'll": "we will", "they'll": "they will",
    "let's": "let us",
}
