"""What a user looks at: learning curves of runs (`plot_runs`) and videos of episodes."""
