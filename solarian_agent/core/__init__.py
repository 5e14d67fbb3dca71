"""solarian_agent.core"""
