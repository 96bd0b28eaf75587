"""The console: `local serve`'s jobs in a browser, at `/`, beside the APIs and behind the same guard.

Server-rendered pages with a little JavaScript, nothing built at install time and nothing fetched
from elsewhere (`static/` is package data):

- `routes` (the `Console`: its routes, the CSRF secret), `login` (the token exchanged for a session
  cookie, the login page), `responses` (the content security policy every answer carries),
  `assets` (the files of `static/`), `html` (escaped-by-default markup and the page frame);
- the pages: `jobs_page`, `job_page` over `job_view` (read through the engine and the API
  handlers), `replicas_view`, `trials_view`, `svg_charts`;
- the logs: `log_pages` (a page back from any position, over forward cursor reads), `log_stream`
  (new lines as server-sent events);
- the training curves: `summaries` (a job's event files) over `event_records` (their scalars,
  read without TensorFlow).

A page words what differs by API from the job's own record (a job created as a Vertex AI job has
its tasks named by worker pool), never from a backend's name.

May import: `errors`, `paths`, `cache_eviction`, `loopback`, `job`, `replicas`, `environments`, `gcs_endpoint`,
`tuning`, `storage`, `submit`, `backends`, `backends.local`, `backends.ray`, `backends.vertex`, as the rest of
`emulator` may.
"""
