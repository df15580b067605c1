"""One episode: the runner, its step loop, task phases, failure blame, the policy connection and the video."""
