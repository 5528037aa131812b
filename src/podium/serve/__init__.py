"""podium as a service: ``podium serve`` (an OpenAI-compatible API) and ``podium shadow`` (a
proxy that records what podium would have done beside an existing pipeline)."""
