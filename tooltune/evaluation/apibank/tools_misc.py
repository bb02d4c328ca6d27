"""API-Bank tools without accounts (official `apis/`): calculator, date, history, stocks, hotel, smart home,
music, e-mail."""

from __future__ import annotations

import re
from typing import Any

from tooltune.evaluation.apibank.tool import Tool, Unscorable, normal_time, pad_year, same_outcome, strptime

TIME = "%Y-%m-%d %H:%M:%S"
_EMAIL = re.compile(r"^[a-z0-9]+[\._]?[a-z0-9]+[@]\w+[.]\w{2,3}$")


class Calculator(Tool):
    """The official hand-written evaluator: parentheses first, then * and /, then + and -, left to right."""

    name = "Calculator"

    def call(self, formula: Any) -> dict[str, Any]:
        return self.respond({"formula": formula}, lambda: self.calculate(formula))

    def check(self, response: dict[str, Any], truth: dict[str, Any]) -> bool:
        return (response["input"]["formula"].replace(" ", "") == truth["input"]["formula"].replace(" ", "")
                and same_outcome(response, truth))

    def calculate(self, formula: Any) -> Any:
        formula = formula.replace(" ", "")
        ops = sum(formula.count(c) for c in "+-*/")
        if (not formula or any(c not in "0123456789+-*/()" for c in formula)
                or formula.count("(") != formula.count(")") or ops == 0 or ops + 1 == len(formula)):
            raise Exception("invalid formula")
        tokens: list[Any] = []
        number = ""
        for c in formula:
            if c in "0123456789":
                number += c
            else:
                if number != "":
                    tokens.append(float(number))
                    number = ""
                tokens.append(c)
        if number != "":
            tokens.append(float(number))
        return self.evaluate(tokens)

    def evaluate(self, tokens: list[Any]) -> Any:
        """The official loops, with a bound: an operator first in the list makes them repeat forever."""
        budget = 4 * len(tokens) + 8
        while "(" in tokens:
            left, right = tokens.index("("), tokens.index(")")
            tokens[left:right + 1] = [self.evaluate(tokens[left + 1:right])]
            budget = self._spend(budget)
        for group in ("*/", "+-"):
            while any(op in tokens for op in group):
                at = min(tokens.index(op) for op in group if op in tokens)
                tokens[at - 1:at + 2] = [self.operate(tokens[at - 1], tokens[at], tokens[at + 1])]
                budget = self._spend(budget)
        return tokens[0]

    @staticmethod
    def _spend(budget: int) -> int:
        if budget <= 0:
            raise Unscorable("the official Calculator never finishes on this formula")
        return budget - 1

    @staticmethod
    def operate(a: Any, op: str, b: Any) -> Any:
        if op == "+":
            return a + b
        if op == "-":
            return a - b
        if op == "*":
            return a * b
        return a / b


class GetToday(Tool):
    name = "GetToday"

    def call(self, **kwargs: Any) -> dict[str, Any]:
        return {"api_name": self.name, "input": None, "output": "2023-03-31", "exception": None}

    def check(self, response: dict[str, Any], truth: dict[str, Any]) -> bool:
        return response["output"] is not None and response["exception"] is None and response["input"] is None


class QueryHistoryToday(Tool):
    name = "QueryHistoryToday"
    database_name = "History"

    @staticmethod
    def format_check(date: Any) -> Any:
        """`%m-%d` of a `%Y-%m-%d` or `%m-%d` date; the ValueError when neither parses."""
        date = pad_year(date)
        try:
            return strptime(date, "%Y-%m-%d").strftime("%m-%d")
        except Exception:
            try:
                return strptime(date, "%m-%d").strftime("%m-%d")
            except Exception as e:
                return e

    def call(self, date: Any) -> dict[str, Any]:
        def run() -> list[str]:
            day = self.format_check(date)
            if isinstance(day, ValueError):
                raise day
            if day not in self.database:
                raise Exception("The date is not in the database.")
            return [f"Title: {h['Title'].strip()}, Date: {h['Date'].strip()}, "
                    f"Description: {h['Description'].strip()}" for h in self.database[day]]

        return self.respond({"date": date}, run)

    def check(self, response: dict[str, Any], truth: dict[str, Any]) -> bool:
        return (self.format_check(response["input"]["date"]) == self.format_check(truth["input"]["date"])
                and same_outcome(response, truth))


class QueryStock(Tool):
    name = "QueryStock"
    database_name = "Stock"

    @staticmethod
    def format_check(stock_code: Any, date: Any) -> tuple[Any, Any]:
        code = stock_code.upper().strip() or None
        return code, normal_time(date, "%Y-%m-%d")

    def call(self, stock_code: Any, date: Any) -> dict[str, Any]:
        def run() -> Any:
            code, day = self.format_check(stock_code, date)
            if code is None:
                raise Exception("The stock code cannot be empty.")
            if isinstance(day, Exception):
                raise day
            if code not in self.database:
                raise Exception("The stock code does not exist.")
            if day not in self.database[code]:
                raise Exception("The stock price of this date is not maintained.")
            return self.database[code][day]

        return self.respond({"stock_code": stock_code, "date": date}, run)

    def check(self, response: dict[str, Any], truth: dict[str, Any]) -> bool:
        r, t = response["input"], truth["input"]
        return (self.format_check(r["stock_code"], r["date"]) == self.format_check(t["stock_code"], t["date"])
                and same_outcome(response, truth))


class BookHotel(Tool):
    name = "BookHotel"
    database_name = "Hotel"

    def call(self, hotel_name: Any, check_in_time: Any, check_out_time: Any, room_count: Any,
             adult_count: Any, child_count: Any) -> dict[str, Any]:
        order = {"hotel_name": hotel_name, "check_in_time": check_in_time, "check_out_time": check_out_time,
                 "room_count": room_count, "adult_count": adult_count, "child_count": child_count}

        def run() -> str:
            check_in, check_out = strptime(check_in_time, "%Y-%m-%d"), strptime(check_out_time, "%Y-%m-%d")
            if adult_count > 2 and room_count == 1:
                raise Exception("The number of adults is greater than 2. Two rooms are ordered.")
            for row in self.database.values():
                if row["hotel_name"] == hotel_name:
                    begin = strptime(row["check_in_time"], "%Y-%m-%d")
                    end = strptime(row["check_out_time"], "%Y-%m-%d")
                    if begin <= check_in < end or begin < check_out <= end:
                        raise Exception("The room is not available.")
            order_id = str(len(self.database) + 1)
            self.database[order_id] = dict(order)
            return order_id

        return self.respond(order, run)


class _Scene(Tool):
    database_name = "Scenes"

    def check(self, response: dict[str, Any], truth: dict[str, Any]) -> bool:
        return (response["input"]["name"].strip().lower() == truth["input"]["name"].strip().lower()
                and same_outcome(response, truth))


class QueryScene(_Scene):
    name = "QueryScene"

    def call(self, name: Any) -> dict[str, Any]:
        def run() -> Any:
            key = name.strip().lower()
            if key == "":
                raise Exception("Scene name cannot be empty.")
            if key in self.database:
                return self.database[key]
            raise Exception("Scene not found.")

        return self.respond({"name": name}, run)


class DeleteScene(_Scene):
    name = "DeleteScene"

    def call(self, name: Any) -> dict[str, Any]:
        def run() -> str:
            key = name.strip().lower()
            if key == "":
                raise Exception("Scene name cannot be empty.")
            if key not in self.database:
                raise Exception("The scene does not exist.")
            del self.database[key]
            return "success"

        return self.respond({"name": name}, run)


class TimedSwitch(Tool):
    name = "TimedSwitch"
    database_name = "TimeSwitch"

    def call(self, name: Any, time: Any, on: Any) -> dict[str, Any]:
        def run() -> str:
            device = name.strip().lower()
            if device == "":
                raise Exception("Name cannot be empty.")
            when = normal_time(time, TIME)
            if isinstance(when, Exception):
                raise when
            timers = self.database.setdefault(device, [])
            for timer in timers:
                if timer["time"] == when:
                    timer["on"] = on
                    return "success"
            timers.append({"time": when, "on": on})
            return "success"

        return self.respond({"name": name, "time": time, "on": on}, run)

    def check(self, response: dict[str, Any], truth: dict[str, Any]) -> bool:
        r, t = response["input"], truth["input"]
        return (r["name"].strip().lower() == t["name"].strip().lower()
                and normal_time(r["time"], TIME) == normal_time(t["time"], TIME) and r["on"] == t["on"]
                and same_outcome(response, truth))


class CancelTimedSwitch(Tool):
    name = "CancelTimedSwitch"
    database_name = "TimeSwitch"

    def call(self, name: Any, time: Any) -> dict[str, Any]:
        def run() -> str:
            device = name.strip().lower()
            if device == "":
                raise Exception("name cannot be empty.")
            when = normal_time(time, TIME)
            if isinstance(when, Exception):
                raise when
            if device not in self.database:
                raise Exception("device name does not exist.")
            for i, timer in enumerate(self.database[device]):
                if timer["time"] == when:
                    self.database[device].pop(i)
                    return "success"
            raise Exception("time does not exist.")

        return self.respond({"name": name, "time": time}, run)

    def check(self, response: dict[str, Any], truth: dict[str, Any]) -> bool:
        r, t = response["input"], truth["input"]
        return (r["name"].strip().lower() == t["name"].strip().lower()
                and normal_time(r["time"], TIME) == normal_time(t["time"], TIME)
                and same_outcome(response, truth))


class PlayMusic(Tool):
    name = "PlayMusic"

    def call(self, music_name: Any) -> dict[str, Any]:
        def run() -> str:
            music = music_name.lower().strip()
            if music == "":
                raise Exception("The music name cannot be empty.")
            return f"music://{music}"

        return self.respond({"music_name": music_name}, run)

    def check(self, response: dict[str, Any], truth: dict[str, Any]) -> bool:
        return response["output"] == truth["output"]


class SendEmail(Tool):
    name = "SendEmail"

    def call(self, receiver: Any, subject: Any, content: Any) -> dict[str, Any]:
        def run() -> str:
            if not _EMAIL.match(receiver.strip()):
                raise Exception("Email address of the receiver is invalid.")
            if subject.strip() == "":
                raise Exception("Subject cannot be empty.")
            if content.strip() == "":
                raise Exception("Content cannot be empty.")
            return "success"

        return self.respond({"receiver": receiver, "subject": subject, "content": content}, run)

    def check(self, response: dict[str, Any], truth: dict[str, Any]) -> bool:
        r, t = response["input"], truth["input"]
        return (r["receiver"].strip().lower() == t["receiver"].strip().lower()
                and r["subject"].strip() == t["subject"].strip()
                and r["content"].strip() == t["content"].strip() and same_outcome(response, truth))


TOOLS: tuple[type[Tool], ...] = (Calculator, GetToday, QueryHistoryToday, QueryStock, BookHotel, QueryScene,
                                 DeleteScene, TimedSwitch, CancelTimedSwitch, PlayMusic, SendEmail)
