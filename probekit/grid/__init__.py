"""Probing grids (models x datasets x probes x options x layers x seeds) on one machine or a Ray cluster.

``spec`` declares a grid and expands it into cells; ``work.run_cell`` computes one cell anywhere;
``backends`` runs cells locally or on Ray; ``driver`` stores each finished cell as a benchmark run.
"""

from .driver import GridResult, cells_frame, get_grid, grid_id_of, list_grids, run_grid, start_grid
from .spec import Cell, GridSpec, distinguishing_labels

__all__ = ["Cell", "GridResult", "GridSpec", "cells_frame", "distinguishing_labels", "get_grid", "grid_id_of",
           "list_grids", "run_grid", "start_grid"]
