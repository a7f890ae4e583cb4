"""Reading bytes the factory did not write: archives (wheels, sdists, NVIDIA's archives) through one layer with
size and ratio limits, index pages and downloads bounded in size and time, and strings taken from any of them
shown safely in messages and logs."""
