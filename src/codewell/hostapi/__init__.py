"""The code hosts' REST APIs, one client stack for sign-in (auth's providers) and connections (codehosts): HTTP
with paging, rate limits, ETags and one error mapping (`http`), and per host kind where its API lives, how it
authenticates and what git calls its token's user (`hosts`). A kit: it imports no capability."""
