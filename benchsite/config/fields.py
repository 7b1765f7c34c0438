"""How one setting is declared (`env`) and the kinds of value the variables hold.

The words are runners.envvars' (shared with the GPU side): booleans take 1/0, true/false, yes/no,
on/off in any case, and an empty value is false (`FOO=` switches a flag off). Numbers must parse:
an empty number is an error, not the default. Lists are comma-separated (not JSON).
"""
import ipaddress
from typing import Annotated, Any, ClassVar

from pydantic import AfterValidator, BeforeValidator, Field
from pydantic_core import PydanticCustomError, PydanticUseDefault
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from runners.envvars import FALSE_WORDS, TRUE_WORDS

# The kind of error whose message leaves the variable's value out (load.py): it names the bad item
# itself, or the value is a secret.
WITHOUT_VALUE = "env_without_value"


def env(name: str, default: Any, why: str, *, shown: str | None = None, **limits: Any) -> Any:
    """A setting read from the variable NAME, WHY it exists (its line in docs/configuration.md).
    SHOWN: the default as that page states it, where DEFAULT is computed at start (None here).
    LIMITS: pydantic's constraints (ge=1, ...)."""
    extra = {"shown": shown} if shown is not None else None
    return Field(default, validation_alias=name, description=why, json_schema_extra=extra, **limits)


class Group(BaseSettings):
    """The settings of one subsystem, read from the environment by exact name; TITLE and ABOUT
    head its section of the reference."""
    model_config = SettingsConfigDict(case_sensitive=True, frozen=True, extra="ignore")
    title: ClassVar[str] = ""
    about: ClassVar[str] = ""


def _flag(raw: Any) -> Any:
    if not isinstance(raw, str):
        return raw
    word = raw.strip().lower()
    if word in TRUE_WORDS or word in FALSE_WORDS:
        return word in TRUE_WORDS
    raise PydanticCustomError("env_flag", "is not a boolean (use 1/0, true/false, yes/no, on/off)")


def _comma_list(raw: Any) -> Any:
    return [item.strip() for item in raw.split(",") if item.strip()] if isinstance(raw, str) else raw


def _networks(raw: Any) -> Any:
    networks = []
    for item in _comma_list(raw):
        try:
            networks.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            raise PydanticCustomError(WITHOUT_VALUE, "{item} is not an address or CIDR such as 10.0.0.0/8",
                                      {"item": repr(item)}) from None
    return networks


def _blank_is_default(raw: Any) -> Any:
    if isinstance(raw, str) and not raw.strip():
        raise PydanticUseDefault()
    return raw


Flag = Annotated[bool, BeforeValidator(_flag)]
CommaList = Annotated[list[str], NoDecode, BeforeValidator(_comma_list)]
Networks = Annotated[list[ipaddress.IPv4Network | ipaddress.IPv6Network], NoDecode, BeforeValidator(_networks)]
# An API's or the dashboard's address: links are joined to it, so no trailing slash.
Url = Annotated[str, AfterValidator(lambda url: url.rstrip("/"))]
# A positive number such as 0.25 (= 25%); empty: the default.
Fraction = Annotated[float, BeforeValidator(_blank_is_default), Field(gt=0, allow_inf_nan=False)]
