"""API-Bank account and bank tools: tokens, registration, passwords, bank accounts (official `apis/*.py`)."""

from __future__ import annotations

import string
from typing import Any

from tooltune.evaluation.apibank.tool import Tool


class CheckToken(Tool):
    name = "CheckToken"
    database_name = "Account"
    with_api_name = False

    def check_token(self, token: Any) -> str:
        for username in self.database:
            if self.database[username]["token"] == token:
                return username
        raise Exception("The token is invalid.")

    def call(self, token: Any) -> dict[str, Any]:
        return self.respond({"token": token}, lambda: {"username": self.check_token(token)})


class GetUserToken(Tool):
    name = "GetUserToken"
    database_name = "Account"

    def call(self, username: Any, password: Any) -> dict[str, Any]:
        def run() -> dict[str, Any]:
            if username not in self.database:
                raise Exception("The username does not exist.")
            if self.database[username]["password"] != password:
                raise Exception("The password is incorrect.")
            return {"token": self.database[username]["token"]}

        return self.respond({"username": username, "password": password}, run)


class RegisterUser(Tool):
    name = "RegisterUser"
    database_name = "Account"
    with_api_name = False

    def call(self, username: Any, password: Any, email: Any) -> dict[str, Any]:
        def run() -> dict[str, Any]:
            if username in self.database:
                raise Exception("The username already exists.")
            token = "".join(self.rng.choices(string.ascii_letters + string.digits, k=18)).lower()
            self.database[username] = {"password": password, "token": token, "email": email}
            return {"token": token}

        return self.respond({"username": username, "password": password, "email": email}, run)

    def check(self, response: dict[str, Any], truth: dict[str, Any]) -> bool:
        if truth["output"] is None and response["output"] is not None:
            return False
        return response["input"] == truth["input"] and response["exception"] == truth["exception"]


class DeleteAccount(Tool):
    name = "DeleteAccount"
    database_name = "Account"
    with_api_name = False

    def call(self, token: Any) -> dict[str, Any]:
        def run() -> dict[str, Any]:
            username = self.username(token)
            if username in self.database:
                del self.database[username]
                return {"status": "success"}
            raise Exception("No such user.")

        return self.respond({"token": token}, run)


class ModifyPassword(Tool):
    name = "ModifyPassword"
    database_name = "Account"

    def call(self, token: Any, old_password: Any, new_password: Any) -> dict[str, Any]:
        def run() -> dict[str, Any]:
            username = self.username(token)
            if self.database[username]["password"] != old_password:
                raise Exception("The old password is incorrect.")
            self.database[username]["password"] = new_password
            return {"status": "success"}

        inputs = {"token": token, "old_password": old_password, "new_password": new_password}
        return self.respond(inputs, run)


class ForgotPassword(Tool):
    """Two calls: 'Forgot Password' (username, email) returns the code 970420 and remembers the user on this
    instance; 'Verification Code' (verification_code, new_password) then changes that user's password."""

    name = "ForgotPassword"
    database_name = "Account"
    with_api_name = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.verification_code: int | None = None
        self.user: Any = None

    def call(self, status: Any, **kwargs: Any) -> dict[str, Any]:
        return self.respond({"status": status, **kwargs}, lambda: self._forgot(status, kwargs))

    def _forgot(self, status: Any, kwargs: dict[str, Any]) -> Any:
        if status == "Forgot Password":
            if "username" not in kwargs or "email" not in kwargs:
                raise Exception("The username and email are required for the first call.")
            if kwargs["username"] not in self.database:
                raise Exception("The username does not exist.")
            if self.database[kwargs["username"]]["email"] != kwargs["email"]:
                raise Exception("The email is incorrect.")
            self.verification_code, self.user = 970420, kwargs["username"]
            return self.verification_code
        if status == "Verification Code":
            if not self.verification_code:
                raise Exception("You need to call the API with status 'Forgot Password' at first.")
            if "new_password" not in kwargs or "verification_code" not in kwargs:
                raise Exception("The new password and verification code are required for the second call.")
            if self.verification_code == kwargs["verification_code"]:
                self.database[self.user]["password"] = kwargs["new_password"]
                return "success"
            raise Exception("The verification code is incorrect.")
        raise Exception("The status is only 'Forgot Password' or 'Verification Code'.")


class OpenBankAccount(Tool):
    """Its database is not loaded from a file: the official constructor starts it with one test account."""

    name = "OpenBankAccount"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.database = {0: {"account": "test", "password": "test", "name": "yifei"}}

    def call(self, account: Any, password: Any, name: Any) -> dict[str, Any]:
        def run() -> str:
            for key in self.database:
                if self.database[key]["account"] == account:
                    return "failed"
            self.database[len(self.database) + 1] = {"account": account, "password": password, "name": name}
            return "success"

        return self.respond({"account": account, "password": password, "name": name}, run)


class QueryBalance(Tool):
    name = "QueryBalance"
    database_name = "Bank"

    def call(self, token: Any) -> dict[str, Any]:
        def run() -> Any:
            try:
                token.strip()
                username = self.username(token)
            except Exception:
                raise Exception("The token is incorrect.") from None
            if username not in self.database:
                raise Exception("The user does not have an account.")
            return self.database[username]["balance"]

        return self.respond({"token": token}, run)

    def check(self, response: dict[str, Any], truth: dict[str, Any]) -> bool:
        return (response["input"]["token"].strip() == truth["input"]["token"].strip()
                and response["output"] == truth["output"] and response["exception"] == truth["exception"])


TOOLS: tuple[type[Tool], ...] = (CheckToken, GetUserToken, RegisterUser, DeleteAccount, ModifyPassword,
                                 ForgotPassword, OpenBankAccount, QueryBalance)
