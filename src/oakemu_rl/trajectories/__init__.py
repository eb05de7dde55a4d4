"""Episode recording (trajectories); restart pools and trajectory replay build on it."""

from .coordinator import TrajectoryEpisodeCoordinator, TrajectoryRecord

__all__ = ["TrajectoryEpisodeCoordinator", "TrajectoryRecord"]
