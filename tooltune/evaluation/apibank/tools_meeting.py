"""API-Bank meeting tools (official `apis/*_meeting.py`): add, delete, modify, query a meeting reservation."""

from __future__ import annotations

from typing import Any

from tooltune.evaluation.apibank.tool import Tool, next_id, same_outcome, strptime, words_overlap

TIME = "%Y-%m-%d %H:%M:%S"


class _Meeting(Tool):
    database_name = "Meeting"

    @staticmethod
    def inputs(token: Any, meeting_topic: Any, start_time: Any, end_time: Any, location: Any,
               attendees: Any) -> dict[str, Any]:
        return {"token": token, "meeting_topic": meeting_topic, "start_time": start_time,
                "end_time": end_time, "location": location, "attendees": attendees}

    def find(self, token: Any, meeting_topic: Any, start_time: Any, end_time: Any) -> Any:
        """Validate as the official delete / modify / query tools do; the key of the user's meeting with
        this topic or start time, or None."""
        if start_time:
            strptime(start_time, TIME)
        if end_time:
            strptime(end_time, TIME)
        if meeting_topic.strip() == "" and not start_time:
            raise Exception("Meeting Topic and start_time should not be null both")
        username = self.username(token)
        for key in self.database:
            row = self.database[key]
            if row["username"] == username and (row["meeting_topic"] == meeting_topic
                                                or row["start_time"] == start_time):
                return key
        return None

    @staticmethod
    def not_found(meeting_topic: Any, start_time: Any) -> None:
        if meeting_topic:
            raise Exception(f"You have no meeting about {meeting_topic}")
        if start_time:
            raise Exception(f"You have no meeting at time : {start_time}")

    def check(self, response: dict[str, Any], truth: dict[str, Any]) -> bool:
        """Topic words overlap; every other input equal (the topic is popped from both, as officially)."""
        satisfied = words_overlap(response["input"]["meeting_topic"], truth["input"]["meeting_topic"])
        response["input"].pop("meeting_topic")
        truth["input"].pop("meeting_topic")
        return satisfied and response["input"] == truth["input"] and same_outcome(response, truth)


class AddMeeting(_Meeting):
    name = "AddMeeting"

    def call(self, token: Any, meeting_topic: Any, start_time: Any, end_time: Any, location: Any,
             attendees: Any) -> dict[str, Any]:
        def run() -> str:
            strptime(start_time, TIME)
            strptime(end_time, TIME)
            if meeting_topic.strip() == "":
                raise Exception("Meeting Topic should not be null")
            new_id = next_id(self.database)
            self.database[str(new_id)] = {"username": self.username(token), "meeting_topic": meeting_topic,
                                          "start_time": start_time, "end_time": end_time,
                                          "location": location, "attendees": attendees}
            return "success"

        return self.respond(self.inputs(token, meeting_topic, start_time, end_time, location, attendees), run)


class DeleteMeeting(_Meeting):
    name = "DeleteMeeting"

    def call(self, token: Any, meeting_topic: Any, start_time: Any, end_time: Any, location: Any,
             attendees: Any) -> dict[str, Any]:
        def run() -> str:
            key = self.find(token, meeting_topic, start_time, end_time)
            if key is None:
                self.not_found(meeting_topic, start_time)
            else:
                del self.database[key]
            return "success"

        return self.respond(self.inputs(token, meeting_topic, start_time, end_time, location, attendees), run)

    def check(self, response: dict[str, Any], truth: dict[str, Any]) -> bool:
        """Officially reads the input `time`, which a meeting does not have: a KeyError whenever both
        deletions succeed (the scorer counts it as the official evaluator does)."""
        if truth["output"] == "success" and response["output"] == "success":
            return response["input"]["time"] == truth["input"]["time"]
        return same_outcome(response, truth)


class ModifyMeeting(_Meeting):
    name = "ModifyMeeting"

    def call(self, token: Any, meeting_topic: Any, start_time: Any, end_time: Any, location: Any,
             attendees: Any) -> dict[str, Any]:
        def run() -> str:
            key = self.find(token, meeting_topic, start_time, end_time)
            if key is None:
                self.not_found(meeting_topic, start_time)
                return "success"
            if meeting_topic:
                self.database[key]["meeting_topic"] = meeting_topic
            if start_time:
                self.database[key]["start_time"] = start_time
                self.database[key]["end_time"] = end_time
            return "success"

        return self.respond(self.inputs(token, meeting_topic, start_time, end_time, location, attendees), run)


class QueryMeeting(_Meeting):
    name = "QueryMeeting"

    def call(self, token: Any, meeting_topic: Any, start_time: Any, end_time: Any, location: Any,
             attendees: Any) -> dict[str, Any]:
        def run() -> Any:
            key = self.find(token, meeting_topic, start_time, end_time)
            if key is None:
                self.not_found(meeting_topic, start_time)
                return Exception("Error")  # returned, not raised, officially
            return self.database[key]

        return self.respond(self.inputs(token, meeting_topic, start_time, end_time, location, attendees), run)


TOOLS: tuple[type[Tool], ...] = (AddMeeting, DeleteMeeting, ModifyMeeting, QueryMeeting)
