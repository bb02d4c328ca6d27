"""API-Bank look-up and online-service tools (official `apis/`): documents, images, speech, Wikipedia, web
search, dictionary, translation and the tool searcher.

The official Dictionary, Translate, SearchEngine and ToolSearcher compute their answers online or with a
model (a web dictionary, Google Translate, BM25 over NLTK tokens, paraphrase-MiniLM-L3-v2 embeddings), which
cannot be reproduced offline. Ours answer the requests the dialogue files record with the recorded answer
(`tables.RECORDED`), everything around that answer (argument normalisation, language detection, the tool
searcher's output built from today's descriptions, the checks) as officially; any other request is
`Unscorable`.
"""

from __future__ import annotations

from typing import Any

from tooltune.evaluation.apibank.tables import LANGUAGES, SPECS
from tooltune.evaluation.apibank.tool import Tool, Unscorable, same_outcome, same_result


class DocumentQA(Tool):
    name = "DocumentQA"
    database_name = "QuestionAnswering"

    def call(self, url: Any, question: Any) -> dict[str, Any]:
        def run() -> Any:
            link, asked = url.strip(), question.strip()
            if asked == "":
                raise Exception("The question is empty.")
            if link not in self.database:
                raise Exception("The document of this url failed to be processed.")
            if asked not in self.database[link]:
                return "The question is too difficult to answer."
            return self.database[link][asked]

        return self.respond({"url": url, "question": question}, run)

    def check(self, response: dict[str, Any], truth: dict[str, Any]) -> bool:
        r, t = response["input"], truth["input"]
        return (r["url"].strip() == t["url"].strip() and r["question"].strip() == t["question"].strip()
                and same_outcome(response, truth))


class ImageCaption(Tool):
    name = "ImageCaption"
    database_name = "ImageCaptioning"

    def call(self, url: Any) -> dict[str, Any]:
        def run() -> Any:
            link = url.strip()
            if not link.endswith((".jpg", ".jpeg", ".png")):
                raise Exception("The url should end with .jpg, .jpeg or .png.")
            for item in self.database:
                if item["url"] == link:
                    return item["caption"]
            raise Exception("The image of this url failed to be processed.")

        return self.respond({"url": url}, run)

    def check(self, response: dict[str, Any], truth: dict[str, Any]) -> bool:
        return same_result(response, truth)


class SpeechRecognition(Tool):
    name = "SpeechRecognition"
    database_name = "SpeechRecognition"

    def call(self, url: Any) -> dict[str, Any]:
        def run() -> Any:
            link = url.strip()
            if not link.endswith(".wav"):
                raise Exception("The url should end with .wav.")
            if link in self.database:
                return self.database[link]
            raise Exception("The audio of this url failed to be processed.")

        return self.respond({"url": url}, run)


class Wiki(Tool):
    name = "Wiki"
    database_name = "Wiki"

    def call(self, keyword: Any) -> dict[str, Any]:
        def run() -> dict[str, Any]:
            key = keyword.replace("_", " ").strip().lower()
            if key in self.database:
                return {"url": self.database[key]["url"], "summary": self.database[key]["summary"]}
            raise Exception("Keyword not found.")

        return self.respond({"keyword": keyword}, run)

    def check(self, response: dict[str, Any], truth: dict[str, Any]) -> bool:
        return response["api_name"] == truth["api_name"] and same_outcome(response, truth)


class _Recorded(Tool):
    def answer(self, key: Any) -> Any:
        table = self.recorded.get(self.name, {})
        try:
            if key in table:
                return table[key]
        except TypeError:  # an unhashable key (a list argument) was never recorded
            pass
        raise Unscorable(f"{self.name} answers {key!r} online; no recorded answer")


class SearchEngine(_Recorded):
    name = "SearchEngine"

    def call(self, keyword: Any) -> dict[str, Any]:
        return self.respond({"keyword": keyword}, lambda: self.answer(keyword.lower().strip()))

    def check(self, response: dict[str, Any], truth: dict[str, Any]) -> bool:
        """Outputs compared as sets ordered by title + abstract. Officially a result without output leaves
        the sorted copy unassigned: the check then fails with an error, as ours does."""
        if response["api_name"] != truth["api_name"] or response["exception"] != truth["exception"]:
            return False
        if response["output"] is None:
            raise UnboundLocalError("local variable 'response_output' referenced before assignment")
        if truth["output"] is None:
            raise UnboundLocalError("local variable 'groundtruth_output' referenced before assignment")
        mine = sorted(response["output"], key=lambda x: x["title"] + x["abstract"], reverse=True)
        theirs = sorted(truth["output"], key=lambda x: x["title"] + x["abstract"], reverse=True)
        return mine == theirs


class Dictionary(_Recorded):
    name = "Dictionary"

    def call(self, keyword: Any) -> dict[str, Any]:
        return self.respond({"keyword": keyword},
                            lambda: self.answer(keyword.replace("_", " ").strip().lower()))

    def check(self, response: dict[str, Any], truth: dict[str, Any]) -> bool:
        return response["api_name"] == self.name and same_outcome(response, truth)


def detect_language(lang: Any) -> str:
    """The official Translate's language code of a language name or code (None is English); the first code
    of `LANGUAGES` equal to `lang`, or whose name occurs in it."""
    if lang is None:
        return "en"
    if "chinese" in lang:
        return "zh-tw" if "traditional" in lang else "zh-cn"
    for code, name in LANGUAGES.items():
        if code == lang or name in lang:
            return code
    raise Exception("Language not supported.")


class Translate(_Recorded):
    name = "Translate"

    def call(self, src: Any, **kwargs: Any) -> dict[str, Any]:
        def run() -> Any:
            source = kwargs["src_lang"].lower() if "src_lang" in kwargs else None
            target = kwargs["tgt_lang"].lower() if "tgt_lang" in kwargs else None
            if source is not None:
                source = detect_language(source)
            return self.answer((src, source, detect_language(target)))

        return self.respond({"src": src, **kwargs}, run)

    def check(self, response: dict[str, Any], truth: dict[str, Any]) -> bool:
        return (response["api_name"] == truth["api_name"]
                and response["input"]["src"] == truth["input"]["src"] and same_outcome(response, truth))


def tool_description(name: str, for_search: bool = False) -> dict[str, Any]:
    """A tool's description as the official ToolSearcher lists it (with its search text if `for_search`)."""
    spec = SPECS[name]
    out = {"name": name, "description": spec["description"], "input_parameters": spec["input_parameters"],
           "output_parameters": spec["output_parameters"]}
    if for_search:
        words = "".join(" " + c.lower() if c.isupper() else c for c in name).strip()
        out["desc_for_search"] = words + spec["description"]
    return out


class ToolSearcher(_Recorded):
    """The best-matching tool's description; a tool that needs a token comes after GetUserToken's (whose
    entry officially keeps its search text)."""

    name = "ToolSearcher"

    def call(self, keywords: Any) -> dict[str, Any]:
        def run() -> Any:
            best = tool_description(self.answer(keywords))
            if "token" in best["input_parameters"]:
                return [tool_description("GetUserToken", for_search=True), best]
            return best

        return self.respond({"keywords": keywords}, run)

    def check(self, response: dict[str, Any], truth: dict[str, Any]) -> bool:
        return same_outcome(response, truth)


TOOLS: tuple[type[Tool], ...] = (DocumentQA, ImageCaption, SpeechRecognition, Wiki, SearchEngine, Dictionary,
                                 Translate, ToolSearcher)
