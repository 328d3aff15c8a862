"""cake-agent-search: registers the ``search`` agent (:class:`cake_agent_search.agent.SearchAgent`) with Cake."""

from __future__ import annotations

from collections.abc import Callable

from cake_core.hookspecs import hookimpl
from cake_core.loop.agent import Agent

from cake_agent_search.agent import SearchAgent


@hookimpl
def cake_register_agents(register: Callable[[Agent], None]) -> None:
    register(SearchAgent())
