"""API-Bank agenda, alarm and reminder tools (official `apis/*_agenda.py`, `*_alarm.py`, `*_reminder.py`).

Every call needs a token, which the token checker (CheckToken on the shared account database) turns into
the user whose records the call reads or changes.
"""

from __future__ import annotations

from typing import Any

from tooltune.evaluation.apibank.tool import Tool, next_id, same_outcome, strptime, words_overlap

TIME = "%Y-%m-%d %H:%M:%S"


def _deleted_check(response: dict[str, Any], truth: dict[str, Any]) -> bool:
    """The official delete checks: when both succeed only the `time` inputs must agree."""
    if truth["output"] == "success" and response["output"] == "success":
        return response["input"]["time"] == truth["input"]["time"]
    return same_outcome(response, truth)


class AddAgenda(Tool):
    name = "AddAgenda"
    database_name = "Agenda"

    def call(self, token: Any, content: Any, time: Any, location: Any) -> dict[str, Any]:
        def run() -> str:
            strptime(time, TIME)
            if content.strip() == "":
                raise Exception("Content should not be null")
            new_id = len(self.database) + 1
            self.database[new_id] = {"username": self.username(token), "content": content, "time": time,
                                     "location": location}
            return "success"

        return self.respond({"token": token, "content": content, "time": time, "location": location}, run)

    def check(self, response: dict[str, Any], truth: dict[str, Any]) -> bool:
        assert response["api_name"] == truth["api_name"], "The API name is not correct."
        r, t = response["input"], truth["input"]
        return (words_overlap(r["content"], t["content"]) and r["time"] == t["time"]
                and r["location"] == t["location"] and same_outcome(response, truth))


class DeleteAgenda(Tool):
    name = "DeleteAgenda"
    database_name = "Agenda"

    def call(self, token: Any, content: Any, time: Any, location: Any) -> dict[str, Any]:
        def run() -> str:
            if time:
                strptime(time, TIME)
            username, deleted = self.username(token), False
            for key in self.database:
                row = self.database[key]
                if row["username"] == username and (row["content"] == content or row["time"] == time):
                    del self.database[key]
                    deleted = True
                    break
            if not deleted:
                if content:
                    raise Exception(f"You have no meeting about {content}")
                if time:
                    raise Exception(f"You have no meeting at time : {time}")
            return "success"

        return self.respond({"token": token, "content": content, "time": time, "location": location}, run)

    def check(self, response: dict[str, Any], truth: dict[str, Any]) -> bool:
        return _deleted_check(response, truth)


class ModifyAgenda(Tool):
    name = "ModifyAgenda"
    database_name = "Agenda"

    def call(self, token: Any, content: Any, time: Any, location: Any) -> dict[str, Any]:
        def run() -> Any:
            if time:
                strptime(time, TIME)
            username = self.username(token)
            for key in self.database:
                row = self.database[key]
                if row["username"] == username and (row["content"] == content or row["time"] == time):
                    self.database[key] = {"username": username, "content": content, "time": time,
                                          "location": location}
                    return "success"
            if content:
                raise Exception(f"You have no agenda about {content}")
            if time:
                raise Exception(f"You have no agenda at time : {time}")
            return Exception("Error")  # returned, not raised, officially

        return self.respond({"token": token, "content": content, "time": time, "location": location}, run)

    def check(self, response: dict[str, Any], truth: dict[str, Any]) -> bool:
        r, t = response["input"], truth["input"]
        return (words_overlap(r["content"], t["content"]) and r["time"] == t["time"]
                and r["location"] == t["location"] and same_outcome(response, truth))


class QueryAgenda(ModifyAgenda):
    name = "QueryAgenda"

    def call(self, token: Any, content: Any, time: Any, location: Any) -> dict[str, Any]:
        def run() -> Any:
            if time:
                strptime(time, TIME)
            username = self.username(token)
            for key in self.database:
                row = self.database[key]
                if row["username"] == username and (row["content"] == content or row["time"] == time):
                    return row
            if content:
                raise Exception(f"You have no agenda about {content}")
            if time:
                raise Exception(f"You have no agenda at time : {time}")
            raise Exception("Error")

        return self.respond({"token": token, "content": content, "time": time, "location": location}, run)


class AddAlarm(Tool):
    name = "AddAlarm"
    database_name = "Alarm"

    def call(self, token: Any, time: Any) -> dict[str, Any]:
        def run() -> str:
            strptime(time, TIME)
            new_id = len(self.database) + 1
            self.database[new_id] = {"username": self.username(token), "time": time}
            return "success"

        return self.respond({"token": token, "time": time}, run)


class DeleteAlarm(Tool):
    name = "DeleteAlarm"
    database_name = "Alarm"

    def call(self, token: Any, time: Any) -> dict[str, Any]:
        def run() -> str:
            strptime(time, TIME)
            username, deleted = self.username(token), False
            for key in self.database:
                if self.database[key]["username"] == username and self.database[key]["time"] == time:
                    del self.database[key]
                    deleted = True
                    break
            if not deleted and time:
                raise Exception(f"You have no alarm clock at time : {time}")
            return "success"

        return self.respond({"token": token, "time": time}, run)


class ModifyAlarm(Tool):
    name = "ModifyAlarm"
    database_name = "Alarm"

    def call(self, token: Any, from_time: Any, to_time: Any) -> dict[str, Any]:
        def run() -> str:
            strptime(from_time, TIME)
            strptime(to_time, TIME)
            username = self.username(token)
            for key in self.database:
                if self.database[key]["username"] == username and self.database[key]["time"] == from_time:
                    self.database[key] = {"username": username, "time": to_time}
                    return "success"
            raise Exception(f"You have no agenda at time : {from_time}")

        return self.respond({"token": token, "from_time": from_time, "to_time": to_time}, run)


class QueryAlarm(Tool):
    name = "QueryAlarm"
    database_name = "Alarm"

    def call(self, token: Any, time: Any) -> dict[str, Any]:
        def run() -> Any:
            strptime(time, TIME)
            username = self.username(token)
            for key in self.database:
                if self.database[key]["username"] == username and self.database[key]["time"] == time:
                    return self.database[key]
            raise Exception(f"You have no alarm clock at time : {time}")

        return self.respond({"token": token, "time": time}, run)


class _Reminder(Tool):
    database_name = "Reminder"

    def find(self, token: Any, content: Any, time: Any) -> Any:
        """Validate as the official reminder tools do; the key of the user's reminder with this content or
        time, or None."""
        strptime(time, TIME)
        if content.strip() == "":
            raise Exception("Content should not be null")
        username = self.username(token)
        for key in self.database:
            row = self.database[key]
            if row["username"] == username and (row["content"] == content or row["time"] == time):
                return key
        return None

    def check(self, response: dict[str, Any], truth: dict[str, Any]) -> bool:
        return (words_overlap(response["input"]["content"], truth["input"]["content"], lower=True)
                and response["input"]["time"] == truth["input"]["time"] and same_outcome(response, truth))


class AddReminder(_Reminder):
    name = "AddReminder"

    def call(self, token: Any, content: Any, time: Any) -> dict[str, Any]:
        def run() -> str:
            strptime(time, TIME)
            if content.strip() == "":
                raise Exception("Content should not be null")
            new_id = next_id(self.database)
            self.database[str(new_id)] = {"username": self.username(token), "content": content, "time": time}
            return "success"

        return self.respond({"token": token, "content": content, "time": time}, run)

    def check(self, response: dict[str, Any], truth: dict[str, Any]) -> bool:
        assert response["api_name"] == truth["api_name"], "The API name is not correct."
        return super().check(response, truth)


class DeleteReminder(_Reminder):
    name = "DeleteReminder"

    def call(self, token: Any, content: Any, time: Any) -> dict[str, Any]:
        def run() -> str:
            key = self.find(token, content, time)
            if key is None:
                raise Exception(f"You have no reminder about {content} or at time : {time}")
            del self.database[key]
            return "success"

        return self.respond({"token": token, "content": content, "time": time}, run)

    def check(self, response: dict[str, Any], truth: dict[str, Any]) -> bool:
        return _deleted_check(response, truth)


class ModifyReminder(AddReminder):
    name = "ModifyReminder"

    def call(self, token: Any, content: Any, time: Any) -> dict[str, Any]:
        def run() -> str:
            key = self.find(token, content, time)
            if key is None:
                raise Exception(f"You have no reminder about {content} or at time : {time}")
            self.database[key]["content"] = content
            self.database[key]["time"] = time
            return "success"

        return self.respond({"token": token, "content": content, "time": time}, run)


class QueryReminder(_Reminder):
    name = "QueryReminder"

    def call(self, token: Any, content: Any, time: Any) -> dict[str, Any]:
        def run() -> Any:
            key = self.find(token, content, time)
            if key is None:
                raise Exception(f"You have no reminder about {content} or at time : {time}")
            return self.database[key]

        return self.respond({"token": token, "content": content, "time": time}, run)


TOOLS: tuple[type[Tool], ...] = (AddAgenda, DeleteAgenda, ModifyAgenda, QueryAgenda, AddAlarm, DeleteAlarm,
                                 ModifyAlarm, QueryAlarm, AddReminder, DeleteReminder, ModifyReminder,
                                 QueryReminder)
